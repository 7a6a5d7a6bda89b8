# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""``--model``: every form it takes, and one clear line for every mistake."""

from pathlib import Path

import pytest
import torch

from executorch_device_guard.check import models
from executorch_device_guard.check.models import ModelSpecError

USER_MODELS = """
import torch


def make():
    return torch.nn.Linear(2, 3), (torch.ones(1, 2),)


as_tuple = make()


class Eager:
    # ExecuTorch's EagerModelBase convention, without the base class.
    def get_eager_model(self):
        return torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout()).train()

    def get_example_inputs(self):
        return (torch.ones(1, 2),)

    def get_example_kwarg_inputs(self):
        return {"scale": 2.0}

    def get_dynamic_shapes(self):
        return {"x": None}


eager_object = Eager()


def make_eager():
    return Eager()


def broken():
    raise RuntimeError("weights not found\\nsecond line")


needs_missing = None


class EagerFive(Eager):
    def get_eager_model(self):
        return 5
"""


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    path = tmp_path / "user_models.py"
    path.write_text(USER_MODELS)
    return path


@pytest.mark.parametrize(
    "attr", ["make", "as_tuple", "Eager", "eager_object", "make_eager"]
)
def test_every_form_loads(user_file: Path, attr: str) -> None:
    model = models.load_model(f"{user_file}:{attr}")
    assert isinstance(model.module, torch.nn.Module)
    assert isinstance(model.args, tuple) and isinstance(model.args[0], torch.Tensor)
    if attr != "make" and attr != "as_tuple":
        assert model.kwargs == {"scale": 2.0}
        assert model.dynamic_shapes == {"x": None}
        assert (
            not model.module.training
        )  # put in eval mode, as ExecuTorch's examples do


def test_executorch_example_model() -> None:
    model = models.load_model(
        "executorch.examples.models.mlperf_tiny.resnet8:ResNet8Model"
    )
    assert type(model.module).__name__ == "ResNet8"
    assert model.args[0].shape == (1, 3, 32, 32)


def test_builtins() -> None:
    for name in models.BUILTIN:
        assert isinstance(models.load_model(name).module, torch.nn.Module)
    assert models.load("issue")[1][0].shape == (2, 4)


@pytest.mark.parametrize(
    "spec,message",
    [
        ("{dir}/missing.py:make", "no such file {dir}/missing.py; give the path"),
        ("no_such_pkg_xyz.sub:model", "no module named 'no_such_pkg_xyz'"),
        (
            "{file}:nope",
            "has no attribute 'nope'; model classes in {file}: Eager, EagerFive "
            "(give --model {file}:Eager)",
        ),
        ("{file}:broken", "calling broken() failed: RuntimeError: weights not found"),
        (
            "{file}:needs_missing",
            "its attribute 'needs_missing' is a value of type NoneType, not a "
            "model; model classes in {file}: Eager, EagerFive",
        ),
        (":x", "give 'package.module:attr' or 'path/file.py:attr'"),
        (
            "{file}:EagerFive",
            "EagerFive.get_eager_model() returned a value of type int, not a "
            "torch.nn.Module",
        ),
    ],
)
def test_each_mistake_is_one_line(user_file: Path, spec: str, message: str) -> None:
    spec = spec.format(dir=user_file.parent, file=user_file)
    with pytest.raises(ModelSpecError) as error:
        models.load_model(spec)
    text = str(error.value)
    assert "\n" not in text
    assert message.format(dir=user_file.parent, file=user_file) in text
    assert spec in text


NEEDS_ARGUMENTS = """
import torch
from executorch.examples.models.model_base import EagerModelBase


class Net(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.linear = torch.nn.Linear(width, 2)


class Eager(EagerModelBase):
    def __init__(self, width):
        self.width = width

    def get_eager_model(self):
        return Net(self.width)

    def get_example_inputs(self):
        return (torch.ones(1, self.width),)


def make(width):
    return Net(width), (torch.ones(1, width),)
"""


@pytest.mark.parametrize(
    "attr,call",
    [
        ("Net", "Net(width)"),
        ("Eager", "Eager(width)"),
        ("make", "make(width)"),
    ],
)
def test_a_model_that_needs_arguments_is_told_with_the_forms(
    tmp_path: Path, attr: str, call: str
) -> None:
    """A class or function that cannot be called without arguments: the
    line says what it needs and lists the forms check accepts, as for a
    module without example inputs."""
    path = tmp_path / "needs_arguments.py"
    path.write_text(NEEDS_ARGUMENTS)
    spec = f"{path}:{attr}"
    with pytest.raises(ModelSpecError) as error:
        models.load_model(spec)
    text = str(error.value)
    assert "\n" not in text
    assert text.startswith(
        f"--model {spec}: {call} needs an argument, and check calls it "
        "without any; give "
    ), text
    assert models.FORMS in text, text


PAIRS = """
import torch


def net():
    return torch.nn.Linear(4, 3).eval()


def tensor_inputs():
    return net(), torch.ones(2, 4)


def swapped():
    return (torch.ones(2, 4),), net()


def as_list():
    return [net(), (torch.ones(2, 4),)]


def three():
    return net(), torch.ones(2, 4), torch.ones(2, 4)


pair = (net(), torch.ones(2, 4))
"""


@pytest.mark.parametrize(
    "attr,message",
    [
        (
            "tensor_inputs",
            "tensor_inputs() returned a tuple (Linear, Tensor): its example "
            "inputs are a Tensor, not a tuple; return (module, (inputs,)), the "
            "inputs in a tuple",
        ),
        (
            "swapped",
            "swapped() returned a tuple (tuple, Linear): the module comes "
            "second; return (module, example_inputs), the module first",
        ),
        (
            "as_list",
            "as_list() returned a list (Linear, tuple), not a tuple; return "
            "(module, example_inputs)",
        ),
        (
            "three",
            "three() returned a tuple (Linear, Tensor, Tensor) of 3 items, not "
            "2; return (module, example_inputs), the inputs in one tuple: "
            "(module, (x, y))",
        ),
        (
            "pair",
            "its attribute 'pair' is a tuple (Linear, Tensor): its example "
            "inputs are a Tensor, not a tuple; give (module, (inputs,)), the "
            "inputs in a tuple",
        ),
    ],
)
def test_a_pair_that_is_not_module_and_inputs_says_which_part(
    tmp_path: Path, attr: str, message: str
) -> None:
    path = tmp_path / "pairs.py"
    path.write_text(PAIRS)
    with pytest.raises(ModelSpecError) as error:
        models.load_model(f"{path}:{attr}")
    assert str(error.value) == f"--model {path}:{attr}: {message}"


MISSPELT = """
import torch


class Net(torch.nn.Module):
    def forward(self, x):
        return x


class Eager:
    def get_eager_model(self):
        return Net()

    def get_example_inputs(self):
        return (torch.ones(1),)


def make():
    return Net(), (torch.ones(1),)
"""


def test_a_misspelt_attribute_names_the_candidates_without_importing(
    tmp_path: Path,
) -> None:
    """Read from the source, before anything is imported; the import gives
    the same answer when the source binds names unseen (``import *``)."""
    path = tmp_path / "misspelt.py"
    path.write_text(MISSPELT)
    expected = (
        f"--model {path}:mkae: {path} has no attribute 'mkae'; did you mean "
        f"'make'? (give --model {path}:make); model classes in {path}: Eager"
    )
    with pytest.raises(ModelSpecError) as error:
        models.check_file(f"{path}:mkae")
    assert str(error.value) == expected
    dynamic = tmp_path / "dynamic.py"
    dynamic.write_text("from os.path import *\n" + MISSPELT)
    models.check_file(f"{dynamic}:mkae")  # the source cannot tell
    with pytest.raises(ModelSpecError) as error:
        models.load_model(f"{dynamic}:mkae")
    assert str(error.value) == expected.replace(str(path), str(dynamic))
    # No model class and no close name: what may be a model.
    plain = tmp_path / "plain.py"
    plain.write_text("import torch\n\ndef build():\n    pass\n\npair = (1, 2)\n")
    with pytest.raises(ModelSpecError) as error:
        models.check_file(str(plain))
    assert str(error.value).endswith(
        f"has no attribute 'model' (the default when no ':attr' is given); what "
        f"{plain} defines that may be a model: build, pair (give --model "
        f"{plain}:build)"
    )


BOUND_EVERY_WAY = """
import os.path as osp, json
from typing import List as L

try:
    a = 1
except ImportError as b:
    pass
for c, (d, e) in []:
    pass
with open(__file__) as f:
    pass
if (g := 1):
    h: int = 2
i = j = 3
k, *l = [1, 2]
m += 1 if False else 0
def n(x=(o := 4)): pass
class p: q = 5
match 1:
    case [r, *s]: pass
    case {"t": u, **v}: pass
    case w: pass
"""


def test_every_name_the_source_binds_is_found(tmp_path: Path) -> None:
    """A name the import would find is never reported missing."""
    from executorch_device_guard.check import source_names

    path = tmp_path / "bound.py"
    path.write_text(BOUND_EVERY_WAY)
    names = source_names.top_level(path).names
    expected = set("abcdefghijklmnopruvw") | {"osp", "json", "L"}
    assert expected <= names, expected - names
    assert "q" not in names and "x" not in names
    for dynamic in (
        "from os import *",
        "globals()['model'] = 1",
        "def __getattr__(name): return 1",
        "def f():\n    global model\n    model = 1",
        "import sys\nsys.modules[__name__].model = 1",
        "exec('model = 1')",
        "vars()['model'] = 1",
    ):
        path.write_text(dynamic + "\n")
        assert source_names.top_level(path) is None, dynamic
        models.check_file(f"{path}:model")


def test_a_second_colon_is_told_at_once() -> None:
    for spec, attr in (("file.py::make", ":make"), ("pkg.mod:a.b", "a.b")):
        with pytest.raises(ModelSpecError) as error:
            models.parse(spec)
        assert str(error.value) == (
            f"--model {spec}: {attr!r} after ':' is not a Python name; give "
            "'package.module:attr' or 'path/file.py:attr', one ':' then the name "
            "of the model"
        )


def test_a_missing_dependency_is_named(tmp_path: Path) -> None:
    path = tmp_path / "needs_dep.py"
    path.write_text("import dependency_not_installed_xyz\nmodel = None\n")
    with pytest.raises(
        ModelSpecError,
        match="importing .* failed: ModuleNotFoundError: "
        "No module named 'dependency_not_installed_xyz'",
    ):
        models.load_model(f"{path}:model")


def test_every_case_but_cuda_exports_the_model_from_cpu(monkeypatch, tmp_path: Path):
    """A factory may build the model off CPU (``model.cuda()``): the child
    moves it, and its inputs, to CPU for every case but a real CUDA one."""
    from executorch_device_guard.check import child

    moved = []

    class Recording(models.LoadedModel):
        def to(self, device: str) -> models.LoadedModel:
            moved.append(device)
            return super().to(device)

    def load_model(spec: str, stage=None) -> models.LoadedModel:
        module, args = models.issue_model()
        return Recording(module, args)

    monkeypatch.setattr(models, "load_model", load_model)
    result = child.run("cpu", "issue", False, tmp_path / "out", "emit")
    assert result["outcome"] == "ok"
    assert moved == ["cpu"]


def test_moving_a_model_moves_nested_inputs() -> None:
    module, _ = models.issue_model()
    inputs = ((torch.ones(1, 4),), {"x": torch.ones(1, 4)})
    moved = models.LoadedModel(module, inputs, {"y": [torch.ones(1)]}).to("meta")
    assert moved.args[0][0].device.type == "meta"
    assert moved.args[1]["x"].device.type == "meta"
    assert moved.kwargs["y"][0].device.type == "meta"
    assert moved.devices() == ["meta"]


CANDIDATES = """
import torch

from executorch.examples.models.model_base import EagerModelBase


class Small(EagerModelBase):
    def get_eager_model(self):
        return torch.nn.Linear(2, 2)

    def get_example_inputs(self):
        return (torch.ones(1, 2),)


class Duck:
    # The convention without the base class.
    get_eager_model = Small.get_eager_model
    get_example_inputs = Small.get_example_inputs


class NotAModel:
    pass


helper = 3
"""


def test_a_module_without_attr_names_it_and_lists_model_classes() -> None:
    """``--model pkg.module``: the default attribute ``model`` is named, and
    the module's model classes (EagerModelBase's convention) are offered."""
    spec = "executorch.examples.models.lstm"
    with pytest.raises(ModelSpecError) as error:
        models.load_model(spec)
    assert str(error.value) == (
        f"--model {spec}: its attribute 'model' (the default when no ':attr' "
        "is given) is a module, not a model; model classes in "
        f"{spec}: LSTMModel (give --model {spec}:LSTMModel)"
    )


def test_a_missing_attribute_lists_the_model_classes(tmp_path: Path) -> None:
    path = tmp_path / "candidates.py"
    path.write_text(CANDIDATES)
    for spec, attr in ((str(path), "model"), (f"{path}:helper", "helper")):
        with pytest.raises(ModelSpecError) as error:
            models.load_model(spec)
        text = str(error.value)
        assert "\n" not in text
        assert f"'{attr}'" in text, text
        assert text.endswith(
            f"model classes in {path}: Duck, Small (give --model {path}:Duck)"
        ), text
    # Without any, the forms a model may take.
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    with pytest.raises(ModelSpecError) as error:
        models.load_model(str(empty))
    assert str(error.value) == (
        f"--model {empty}: {empty} has no attribute 'model' (the default when "
        f"no ':attr' is given); after ':' name {models.FORMS}"
    )


@pytest.mark.parametrize(
    "spec,message",
    [
        (".hidden:m", "'.hidden' is not a module name; give 'package.module:attr'"),
        ("pkg..mod:m", "'pkg..mod' is not a module name; give"),
        ("some/folder/:m", "'some/folder/' is not a module name; give"),
        ("{dir}/notes.txt:m", "{dir}/notes.txt cannot be loaded as Python"),
    ],
)
def test_what_cannot_be_a_module_is_told_without_importing(
    tmp_path: Path, spec: str, message: str
) -> None:
    (tmp_path / "notes.txt").write_text("x = = 1\n")
    spec = spec.format(dir=tmp_path)
    with pytest.raises(ModelSpecError) as error:
        models.check_file(spec)
    assert str(error.value).startswith(
        f"--model {spec}: " + message.format(dir=tmp_path)
    )


NESTED = """
import torch


class Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x, rest):
        y, extra = rest
        out = self.linear(x) + y * extra["scale"]
        return out, (out.sum(), [out * 2])


def model():
    inputs = (torch.ones(2, 4), [torch.ones(2, 4), {"scale": torch.tensor(3.0)}])
    return Nested().eval(), inputs
"""


def test_nested_inputs_and_outputs_are_bundled_flat(tmp_path: Path) -> None:
    """Tuples, lists and dicts, at any depth: moved as they are, and the
    bundled test case holds them flattened, as the program's inputs."""
    from executorch_device_guard.check import child

    path = tmp_path / "nested.py"
    path.write_text(NESTED)
    result = child.run("cpu", f"{path}:model", False, tmp_path / "out", "bundled")
    assert result["outcome"] == "ok", result
    assert list(result["files"]) == ["bundled_program.bpte"]


# The fifth attack (docs/hostile.md, "The fifth attack").


DATACLASS_MODEL = """
from __future__ import annotations
import dataclasses, sys, typing
import torch

THIS = sys.modules[__name__]


@dataclasses.dataclass
class Config:
    width: int = 4
    kind: typing.ClassVar[str] = "linear"


def make():
    return torch.nn.Linear(Config().width, 3), (torch.ones(2, 4),)
"""


def test_a_model_file_is_in_sys_modules_while_it_runs(tmp_path: Path) -> None:
    """D6: the file's module was not put in sys.modules before it ran, so a
    dataclass with a ClassVar under `from __future__ import annotations`
    (dataclasses looks the module up there), or any sys.modules[__name__],
    was refused as "importing ... failed". Python itself imports it fine."""
    path = tmp_path / "dc_model.py"
    path.write_text(DATACLASS_MODEL)
    model = models.load_model(f"{path}:make")
    assert isinstance(model.module, torch.nn.Linear)


def test_a_model_file_named_like_an_imported_module_replaces_nothing(
    tmp_path: Path,
) -> None:
    """D6: registering the file must not replace a module of its name that
    is imported already (a model file named json.py)."""
    import json
    import sys

    path = tmp_path / "json.py"
    path.write_text(DATACLASS_MODEL)
    assert isinstance(models.load_model(f"{path}:make").module, torch.nn.Linear)
    assert sys.modules["json"] is json


def test_a_model_in_a_folder_whose_name_has_a_colon(tmp_path: Path) -> None:
    """D9: --model split at the first ':', so a file in a folder named
    'a:b' could not be named at all. A ':' is taken for the separator only
    where what comes before it is a .py file's path (or a file)."""
    folder = tmp_path / "d9:models"
    folder.mkdir()
    path = folder / "m.py"
    path.write_text(USER_MODELS)
    for spec in (f"{path}:make", f"{path}:as_tuple"):
        models.check_file(spec)
        assert isinstance(models.load_model(spec).module, torch.nn.Module)
    (folder / "model.py").write_text(
        "import torch\nmodel = torch.nn.Linear(2, 3), (torch.ones(1, 2),)\n"
    )
    assert models.parse(str(folder / "model.py")) == (
        "file",
        str(folder / "model.py"),
        "model",
    )
    assert isinstance(
        models.load_model(str(folder / "model.py")).module, torch.nn.Linear
    )


# check_file under a 2 GiB address space, as `ulimit -v` gives.
_LIMITED_CHECK = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from executorch_device_guard.check import models
try:
    models.check_file(sys.argv[1])
except models.ModelSpecError as e:
    print(e)
"""


@pytest.mark.parametrize("kind", ["huge", "fifo"])
def test_a_model_file_too_large_or_not_a_file_is_refused_unread(
    tmp_path: Path, kind: str
) -> None:
    """D10: check --model read the whole file before any refusal (a 20 GB
    sparse x.py: 18.6 GB of memory). A file larger than any model's source
    (64 MiB), or one that is not a regular file, is refused before it is
    read, in one line."""
    import os
    import subprocess
    import sys

    from conftest import REPO

    path = tmp_path / "x.py"
    if kind == "huge":
        with open(path, "wb") as f:
            f.truncate(3 << 30)
        needle = f"{path} is {3 << 30} bytes, more than a model's source file can be"
    else:
        os.mkfifo(path)
        needle = f"{path} is not a regular file"
    result = subprocess.run(
        [sys.executable, "-c", _LIMITED_CHECK, f"{path}:model"],
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith(f"--model {path}:model: {needle}"), result.stdout
