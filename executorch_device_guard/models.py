# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""Built-in models, and loading a user's model from ``module:attr`` or a file.

A model spec is a built-in name, ``package.module:attr`` or
``path/file.py[:attr]`` (attr defaults to ``model``). The attribute is one of:

- a ``(module, example_inputs)`` tuple;
- a class or object that follows ExecuTorch's ``EagerModelBase`` convention:
  ``get_eager_model()`` and ``get_example_inputs()``, optionally
  ``get_example_kwarg_inputs()`` and ``get_dynamic_shapes()`` (a class is
  instantiated without arguments; the model is put in eval mode), so every
  model under ``executorch.examples.models`` can be given as it is;
- a zero-argument callable returning either of those.

Parsing and the file check need no torch (the CLI uses them); loading does.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
import types
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

FORMS = (
    "a (torch.nn.Module, example_inputs) tuple, an EagerModelBase-style class "
    "or object (get_eager_model(), get_example_inputs()), or a zero-argument "
    "callable returning one of those"
)


class ModelSpecError(ValueError):
    """A --model value that does not lead to a model; one line, with the way out."""


@dataclasses.dataclass
class LoadedModel:
    module: Any  # torch.nn.Module
    args: Tuple[Any, ...]
    kwargs: Optional[Dict[str, Any]] = None
    dynamic_shapes: Any = None

    def to(self, device: str) -> "LoadedModel":
        """The module and every input tensor (also nested ones) on ``device``."""
        import torch
        from torch.utils._pytree import tree_map

        def move(value: Any) -> Any:
            return value.to(device) if isinstance(value, torch.Tensor) else value

        return LoadedModel(
            self.module.to(device),
            tree_map(move, tuple(self.args)),
            tree_map(move, dict(self.kwargs)) if self.kwargs else None,
            self.dynamic_shapes,
        )

    def devices(self) -> List[str]:
        """The device types of the module's parameters and buffers and of the
        example inputs, sorted."""
        import torch
        from torch.utils._pytree import tree_flatten

        tensors = list(self.module.parameters()) + list(self.module.buffers())
        tensors += tree_flatten((self.args, self.kwargs))[0]
        return sorted({t.device.type for t in tensors if isinstance(t, torch.Tensor)})


def issue_model() -> Tuple[Any, Tuple[Any, ...]]:
    """The reproducer's model from ExecuTorch issue #21545."""
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    return model, (torch.ones(2, 4),)


def buffers_model() -> Tuple[Any, Tuple[Any, ...]]:
    import torch

    class WithBuffers(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)
            self.register_buffer("scale", torch.linspace(0.5, 2.0, 4))
            self.register_buffer("shift", torch.arange(4, dtype=torch.float32))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.linear(x) * self.scale + self.shift

    return WithBuffers().eval(), (torch.ones(2, 4),)


def channels_last_conv_model() -> Tuple[Any, Tuple[Any, ...]]:
    import torch

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU())
    model = model.eval().to(memory_format=torch.channels_last)
    return model, (torch.ones(1, 3, 8, 8).to(memory_format=torch.channels_last),)


def conv_batchnorm_model() -> Tuple[Any, Tuple[Any, ...]]:
    """Conv + BatchNorm: XNNPACK fuses the two into new weights while lowering."""
    import torch

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.Conv2d(8, 4, 3),
        torch.nn.BatchNorm2d(4),
    ).eval()
    return model, (torch.randn(1, 3, 12, 12),)


BUILTIN: Dict[str, Callable[[], Any]] = {
    "issue": issue_model,
    "buffers": buffers_model,
    "channels_last_conv": channels_last_conv_model,
    "conv_batchnorm": conv_batchnorm_model,
}


def parse(spec: str) -> Tuple[str, str, str]:
    """``(kind, target, attr)``: kind is 'builtin', 'file' or 'module'."""
    if spec in BUILTIN:
        return "builtin", spec, ""
    target, _, attr = spec.partition(":")
    if not target:
        raise ModelSpecError(
            f"--model {spec!r}: give 'package.module:attr' or 'path/file.py:attr'"
        )
    kind = "file" if target.endswith(".py") or Path(target).is_file() else "module"
    return kind, target, attr or "model"


def check_file(spec: str) -> None:
    """What can be found without importing torch or the model, in well under
    a second: a file that does not exist, a syntax error in the model's file
    (or in the source of its module and the packages above it), a top-level
    package that is not on the path. ModelSpecError, in the words that the
    import itself would give."""
    kind, target, _ = parse(spec)
    if kind == "builtin":
        return
    if kind == "file":
        if not Path(target).is_file():
            raise ModelSpecError(
                f"--model {spec}: no such file {Path(target).resolve()}; give the "
                "path of a Python file, then ':' and the name of the model in it"
            )
        path = Path(target).resolve()
        if importlib.util.spec_from_file_location(path.stem, path) is None:
            raise ModelSpecError(f"--model {spec}: {path} cannot be loaded as Python")
        sources = [path]
    elif not all(name.isidentifier() for name in target.split(".")):
        raise ModelSpecError(
            f"--model {spec}: {target!r} is not a module name; give "
            "'package.module:attr' or 'path/file.py:attr'"
        )
    else:
        sources = _module_sources(spec, target)
    for source in sources:
        try:
            compile(source.read_bytes(), str(source), "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as e:  # ValueError: a null byte
            raise ModelSpecError(
                f"--model {spec}: importing {target} failed: {type(e).__name__}: "
                f"{_first_line(e)}"
            ) from None
        except OSError:
            return  # the import will say what is wrong with it


def _module_not_found(spec: str, name: str) -> ModelSpecError:
    return ModelSpecError(
        f"--model {spec}: no module named '{name}' on the path of "
        f"{sys.executable} (run from the folder that holds it, or give "
        "path/file.py:attr)"
    )


def _module_sources(spec: str, target: str) -> List[Path]:
    """The source files that importing ``target`` runs (each package's
    ``__init__.py``, then the module's), found without running any;
    ModelSpecError if its top-level package is not on the path.

    The path is this process's, with the current folder first, as the
    children that import the model have it. Below the top level, a package
    may extend its own path when it runs, so a module not found there is
    left for the import to report.
    """
    names = target.split(".")
    sys.path.insert(0, os.getcwd())
    try:
        found = importlib.util.find_spec(names[0])
    except Exception:  # noqa: B902 - a finder's failure: the import will tell
        return []
    finally:
        del sys.path[0]
    if found is None:
        raise _module_not_found(spec, names[0])
    sources = [found.origin] if found.has_location else []
    locations = list(found.submodule_search_locations or [])
    for name in names[1:]:
        source, locations = _find_in(locations, name)
        if source is None and not locations:
            break
        sources.append(source)
    return [Path(s) for s in sources if s and s.endswith(".py")]


def _find_in(locations: List[str], name: str) -> Tuple[Optional[str], List[str]]:
    """Where a package's submodule ``name`` is, as the path finder looks,
    without importing anything: ``(its source, its own locations)``; a
    namespace package has no source, a plain module no locations."""
    spaces = []
    for folder in locations:
        package = os.path.join(folder, name)
        if os.path.isfile(os.path.join(package, "__init__.py")):
            return os.path.join(package, "__init__.py"), [package]
        if any(
            os.path.isfile(package + suffix)
            for suffix in importlib.machinery.EXTENSION_SUFFIXES
        ):
            return None, []  # compiled: no source to look at
        if os.path.isfile(package + ".py"):
            return package + ".py", []
        if os.path.isdir(package):
            spaces.append(package)
    return None, spaces


def _import(spec: str, kind: str, target: str) -> Any:
    if kind == "file":
        check_file(spec)
        path = Path(target).resolve()
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        if module_spec is None or module_spec.loader is None:
            raise ModelSpecError(f"--model {spec}: {path} cannot be loaded as Python")
        module = importlib.util.module_from_spec(module_spec)
        loader = module_spec.loader
    try:
        if kind == "file":
            loader.exec_module(module)
            return module
        return importlib.import_module(target)
    except ModuleNotFoundError as e:
        if e.name and (target == e.name or target.startswith(e.name + ".")):
            raise _module_not_found(spec, e.name) from e
        raise ModelSpecError(
            f"--model {spec}: importing {target} failed: {type(e).__name__}: {e} "
            "(install what it needs in this environment)"
        ) from e
    except Exception as e:  # noqa: B902 - the user's module failed to import
        raise ModelSpecError(
            f"--model {spec}: importing {target} failed: {type(e).__name__}: "
            f"{_first_line(e)}"
        ) from e


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [""])[0]


def _is_eager_model(value: Any) -> bool:
    return callable(getattr(value, "get_eager_model", None)) and callable(
        getattr(value, "get_example_inputs", None)
    )


def _from_eager_model(spec: str, value: Any) -> LoadedModel:
    where = getattr(value, "__name__", type(value).__name__)
    try:
        if isinstance(value, type):
            value = value()
        module = value.get_eager_model()
        args = value.get_example_inputs()
        kwargs = (
            value.get_example_kwarg_inputs()
            if hasattr(value, "get_example_kwarg_inputs")
            else None
        )
        shapes = (
            value.get_dynamic_shapes() if hasattr(value, "get_dynamic_shapes") else None
        )
    except Exception as e:  # noqa: B902 - the user's model failed to build
        raise ModelSpecError(
            f"--model {spec}: building the model with {where} failed: "
            f"{type(e).__name__}: {_first_line(e)}"
        ) from e
    import torch

    if not isinstance(module, torch.nn.Module):
        raise ModelSpecError(
            f"--model {spec}: {where}.get_eager_model() returned a value of type "
            f"{type(module).__name__}, not a torch.nn.Module"
        )
    if not isinstance(args, tuple):
        args = (args,)
    loaded = _checked(spec, (module, args))
    return LoadedModel(loaded.module.eval(), loaded.args, kwargs, shapes)


def _checked(spec: str, value: Any, what: str = "") -> LoadedModel:
    """``value`` as a model, or ModelSpecError naming ``what`` it is (e.g.
    "its attribute 'model'") and the way out, ``_hint``'s if given."""
    import torch

    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], torch.nn.Module)
        and isinstance(value[1], (tuple, list))
    ):
        return LoadedModel(value[0], tuple(value[1]))
    if isinstance(value, torch.nn.Module):
        problem = "a torch.nn.Module without example inputs"
    elif isinstance(value, types.ModuleType):
        problem = "a module, not a model"
    else:
        problem = f"a value of type {type(value).__name__}, not a model"
    raise ModelSpecError(f"--model {spec}: {what or 'it'} is {problem}; give {FORMS}")


def model_classes(module: Any) -> List[str]:
    """The names of ``module``'s classes that follow EagerModelBase's
    convention (abstract ones, such as EagerModelBase itself, left out)."""
    return sorted(
        name
        for name, value in vars(module).items()
        if isinstance(value, type)
        and not name.startswith("_")
        and not inspect.isabstract(value)
        and _is_eager_model(value)
    )


def _hint(target: str, module: Any, value: Any = None) -> Optional[str]:
    """The module's model classes, as the way out; also those of ``value``
    if it is a submodule and the module has none. None if there are none."""
    where, names = target, model_classes(module)
    if not names and isinstance(value, types.ModuleType):
        where, names = value.__name__, model_classes(value)
    if not names:
        return None
    shown = ", ".join(names[:10]) + (
        f" and {len(names) - 10} more" if len(names) > 10 else ""
    )
    return f"model classes in {where}: {shown} (give --model {where}:{names[0]})"


def load_model(spec: str, stage: Optional[Callable[[str], None]] = None) -> LoadedModel:
    """Resolves ``spec`` to a model, or raises ModelSpecError saying why not.

    ``stage``, if given, is told what runs next, in words: ``importing
    TARGET``, then ``building the model``.
    """
    say = stage or (lambda _: None)
    kind, target, attr = parse(spec)
    if kind == "builtin":
        say("building the model")
        return _checked(spec, BUILTIN[target]())
    say(f"importing {target}")
    module = _import(spec, kind, target)
    say("building the model")
    default = (
        "" if spec.partition(":")[2] else " (the default when no ':attr' is given)"
    )
    if not hasattr(module, attr):
        hint = _hint(target, module) or f"after ':' name {FORMS}"
        raise ModelSpecError(
            f"--model {spec}: {target} has no attribute '{attr}'{default}; {hint}"
        )
    value = getattr(module, attr)
    if _is_eager_model(value):
        return _from_eager_model(spec, value)
    import torch

    what = f"its attribute '{attr}'{default}"
    if callable(value) and not isinstance(value, torch.nn.Module):
        try:
            value = value()
        except Exception as e:  # noqa: B902 - the user's factory failed
            raise ModelSpecError(
                f"--model {spec}: calling {attr}() failed: {type(e).__name__}: "
                f"{_first_line(e)}"
            ) from e
        if _is_eager_model(value):
            return _from_eager_model(spec, value)
        what = f"{attr}() returned a value that"
    try:
        return _checked(spec, value, what)
    except ModelSpecError as e:
        hint = _hint(target, module, value)
        if hint is None:
            raise
        raise ModelSpecError(f"{str(e).split('; give ', 1)[0]}; {hint}") from None


def load(spec: str) -> Tuple[Any, Tuple[Any, ...]]:
    """``(module, example_inputs)`` for ``spec``; see :func:`load_model`."""
    model = load_model(spec)
    return model.module, model.args
