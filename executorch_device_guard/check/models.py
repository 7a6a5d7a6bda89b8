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
import difflib
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import stat
import sys
import types
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from executorch_device_guard.check import source_names

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


def _split(spec: str) -> Tuple[str, str]:
    """``(target, attr as given)``: split at the first ':' after which the
    part before is a ``.py`` file's path or an existing file (a folder's
    name may hold ':'); else the whole spec, if it is one; else at the
    first ':'."""
    for at in (i for i, c in enumerate(spec) if c == ":"):
        if _is_file_name(spec[:at]):
            return spec[:at], spec[at + 1 :]
    if _is_file_name(spec):
        return spec, ""
    target, _, attr = spec.partition(":")
    return target, attr


def _is_file_name(text: str) -> bool:
    try:
        return text.endswith(".py") or Path(text).is_file()
    except (OSError, ValueError):  # a name too long, a null byte
        return False


def parse(spec: str) -> Tuple[str, str, str]:
    """``(kind, target, attr)``: kind is 'builtin', 'file' or 'module'."""
    if spec in BUILTIN:
        return "builtin", spec, ""
    target, attr = _split(spec)
    if not target:
        raise ModelSpecError(
            f"--model {spec!r}: give 'package.module:attr' or 'path/file.py:attr'"
        )
    if attr and not attr.isidentifier():
        raise ModelSpecError(
            f"--model {spec}: {attr!r} after ':' is not a Python name; give "
            "'package.module:attr' or 'path/file.py:attr', one ':' then the "
            "name of the model"
        )
    kind = "file" if _is_file_name(target) else "module"
    return kind, target, attr or "model"


def check_file(spec: str) -> None:
    """What can be found without importing torch or the model, in well under
    a second: a file that does not exist, a syntax error in the model's file
    (or in the source of its module and the packages above it), a top-level
    package that is not on the path, an attribute that the model's source
    does not define (source_names.py). ModelSpecError, in the words that the
    import itself would give."""
    kind, target, attr = parse(spec)
    if kind == "builtin":
        return
    if kind == "file":
        _refuse_unreadable(spec, Path(target))
        if not Path(target).is_file():
            raise ModelSpecError(
                f"--model {spec}: no such file {Path(target).resolve()}; give the "
                "path of a Python file, then ':' and the name of the model in it"
            )
        path = Path(target).resolve()
        if importlib.util.spec_from_file_location(path.stem, path) is None:
            raise ModelSpecError(f"--model {spec}: {path} cannot be loaded as Python")
        sources, own = [path], path
    elif not all(name.isidentifier() for name in target.split(".")):
        raise ModelSpecError(
            f"--model {spec}: {target!r} is not a module name; give "
            "'package.module:attr' or 'path/file.py:attr'"
        )
    else:
        sources, own = _module_sources(spec, target)
    for source in sources:
        _refuse_unreadable(spec, source)
        try:
            compile(source.read_bytes(), str(source), "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as e:  # ValueError: a null byte
            raise ModelSpecError(
                f"--model {spec}: importing {target} failed: {type(e).__name__}: "
                f"{_first_line(e)}"
            ) from None
        except OSError:
            return  # the import will say what is wrong with it
    defined = source_names.top_level(own) if own is not None else None
    if defined is not None and attr not in defined.names:
        raise _no_attribute(
            spec,
            target,
            attr,
            defined.names,
            defined.model_classes,
            defined.others,
        )


# No model's source file is this large (apply reads its targets up to the
# same size): a larger one is refused before it is read.
MAX_SOURCE = 64 << 20


def _refuse_unreadable(spec: str, source: Path) -> None:
    """ModelSpecError, before anything is read, for a source that is not a
    regular file (a FIFO would never end) or larger than ``MAX_SOURCE`` (a
    sparse file of gigabytes would be read into memory whole)."""
    try:
        st = source.stat()
    except OSError:
        return  # the import will say what is wrong with it
    if not stat.S_ISREG(st.st_mode):
        raise ModelSpecError(
            f"--model {spec}: {source} is not a regular file; give the path of "
            "a Python file"
        )
    if st.st_size > MAX_SOURCE:
        raise ModelSpecError(
            f"--model {spec}: {source} is {st.st_size} bytes, more than a "
            f"model's source file can be ({MAX_SOURCE >> 20} MiB): give the "
            "file that defines the model"
        )


def _module_not_found(spec: str, name: str) -> ModelSpecError:
    return ModelSpecError(
        f"--model {spec}: no module named '{name}' on the path of "
        f"{sys.executable} (run from the folder that holds it, or give "
        "path/file.py:attr)"
    )


def _module_sources(spec: str, target: str) -> Tuple[List[Path], Optional[Path]]:
    """The source files that importing ``target`` runs (each package's
    ``__init__.py``, then the module's), found without running any, and the
    module's own source (None if it has none or it was not found);
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
        return [], None
    finally:
        del sys.path[0]
    if found is None:
        raise _module_not_found(spec, names[0])
    sources = [found.origin if found.has_location else None]
    locations = list(found.submodule_search_locations or [])
    for name in names[1:]:
        source, locations = _find_in(locations, name)
        if source is None and not locations:
            sources.append(None)  # not found, or compiled: the import tells
            break
        sources.append(source)
    own = sources[-1] if len(sources) == len(names) else None
    return (
        [Path(s) for s in sources if s and s.endswith(".py")],
        Path(own) if own and own.endswith(".py") else None,
    )


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
        # Its own name, unless a module of that name is imported already
        # (a file named json.py must not replace the json module).
        name = path.stem if path.stem not in sys.modules else f"__model_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise ModelSpecError(f"--model {spec}: {path} cannot be loaded as Python")
        module = importlib.util.module_from_spec(module_spec)
        loader = module_spec.loader
    try:
        if kind == "file":
            # As import does: a module that looks itself up while it runs
            # (dataclasses does, through its classes' __module__) finds itself.
            name = module.__name__
            sys.modules[name] = module
            try:
                loader.exec_module(module)
            except BaseException:
                sys.modules.pop(name, None)
                raise
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


def _needs_arguments(spec: str, value: Any) -> Optional[ModelSpecError]:
    """The mistake when ``value`` (a class or function) cannot be called
    without arguments, in words, with the forms that check accepts; None
    when it can (or its signature cannot be read)."""
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind()
    except TypeError:
        pass
    else:
        return None
    needed = [
        name
        for name, p in signature.parameters.items()
        if p.default is p.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    name = getattr(value, "__name__", type(value).__name__)
    return ModelSpecError(
        f"--model {spec}: {name}({', '.join(needed)}) needs an argument, and "
        f"check calls it without any; give {FORMS} (e.g. def make(): return "
        f"{name}(...), (inputs,))"
    )


def _from_eager_model(spec: str, value: Any) -> LoadedModel:
    where = getattr(value, "__name__", type(value).__name__)
    if isinstance(value, type):
        needs = _needs_arguments(spec, value)
        if needs is not None:
            raise needs
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


class _NotAModel(ModelSpecError):
    """What a value is instead of a model (``text``), and, when that says
    which part is wrong, the specific way out (``way_out``)."""

    def __init__(self, text: str, way_out: Optional[str]) -> None:
        super().__init__(f"{text}; {way_out or f'give {FORMS}'}")
        self.text, self.way_out = text, way_out


def _checked(spec: str, value: Any, what: str = "it is") -> LoadedModel:
    """``value`` as a model, or _NotAModel saying what ``what`` (e.g. "its
    attribute 'model' is", "make() returned") is instead."""
    import torch

    if (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], torch.nn.Module)
        and isinstance(value[1], (tuple, list))
    ):
        return LoadedModel(value[0], tuple(value[1]))
    way_out = None
    if isinstance(value, (tuple, list)) and any(
        isinstance(v, torch.nn.Module) for v in value
    ):
        problem, way_out = _wrong_pair(value, what.endswith("returned"))
    elif isinstance(value, torch.nn.Module):
        problem = "a torch.nn.Module without example inputs"
    elif isinstance(value, types.ModuleType):
        problem = "a module, not a model"
    else:
        problem = f"a value of type {type(value).__name__}, not a model"
    raise _NotAModel(f"--model {spec}: {what} {problem}", way_out)


def _wrong_pair(value: Any, returned: bool) -> Tuple[str, str]:
    """What is wrong with a tuple or list that holds a module but is not
    ``(module, example_inputs)``, and the way out."""
    import torch

    kind = "a tuple" if isinstance(value, tuple) else "a list"
    shown = [type(v).__name__ for v in value[:4]] + (["..."] if len(value) > 4 else [])
    problem = f"{kind} ({', '.join(shown)})"
    verb = "return" if returned else "give"
    if (
        len(value) == 2
        and isinstance(value, list)
        and isinstance(value[0], torch.nn.Module)
        and isinstance(value[1], (tuple, list))
    ):
        return f"{problem}, not a tuple", f"{verb} (module, example_inputs)"
    if len(value) == 2 and isinstance(value[1], torch.nn.Module):
        if not isinstance(value[0], torch.nn.Module):
            return (
                f"{problem}: the module comes second",
                f"{verb} (module, example_inputs), the module first",
            )
        return f"{problem}: two modules", f"{verb} (module, example_inputs)"
    if len(value) == 2 and isinstance(value[0], torch.nn.Module):
        inputs = type(value[1]).__name__
        return (
            f"{problem}: its example inputs are a {inputs}, not a tuple",
            f"{verb} (module, (inputs,)), the inputs in a tuple",
        )
    return (
        f"{problem} of {len(value)} items, not 2",
        f"{verb} (module, example_inputs), the inputs in one tuple: "
        "(module, (x, y))",
    )


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


def _others(module: Any) -> List[str]:
    """The module's own functions that take no argument, and its tuples."""
    found = []
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        if isinstance(value, tuple):
            found.append(name)
        elif inspect.isfunction(value) and value.__module__ == module.__name__:
            parameters = inspect.signature(value).parameters.values()
            if all(
                p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                for p in parameters
            ):
                found.append(name)
    return sorted(found)


def _hint(target: str, module: Any, value: Any = None) -> Optional[str]:
    """The module's model classes, as the way out; also those of ``value``
    if it is a submodule and the module has none. None if there are none."""
    where, names = target, model_classes(module)
    if not names and isinstance(value, types.ModuleType):
        where, names = value.__name__, model_classes(value)
    if not names:
        return None
    return (
        f"model classes in {where}: {_listed(names)} (give --model {where}:{names[0]})"
    )


def _listed(names: List[str]) -> str:
    return ", ".join(names[:10]) + (
        f" and {len(names) - 10} more" if len(names) > 10 else ""
    )


def _default_note(spec: str) -> str:
    return "" if _split(spec)[1] else " (the default when no ':attr' is given)"


def _no_attribute(
    spec: str,
    target: str,
    attr: str,
    names: Iterable[str],
    classes: List[str],
    others: List[str],
) -> ModelSpecError:
    """``TARGET has no attribute 'ATTR'``, then the names it has that are
    close to it and its model classes; else its model classes; else what
    else may be a model there (``others``: functions without arguments,
    tuples); else the forms a model takes."""
    text = f"--model {spec}: {target} has no attribute '{attr}'{_default_note(spec)}"
    # Names one slip away: about as long, mostly the same letters.
    public = {
        name.lower(): name
        for name in names
        if not name.startswith("__") and abs(len(name) - len(attr)) <= 2
    }
    close = [public[n] for n in difflib.get_close_matches(attr.lower(), public, n=3)]
    if close:
        alternatives = " or ".join(f"'{name}'" for name in close)
        text += f"; did you mean {alternatives}? (give --model {target}:{close[0]})"
        if classes:
            text += f"; model classes in {target}: {_listed(classes)}"
    elif classes:
        text += (
            f"; model classes in {target}: {_listed(classes)} (give --model "
            f"{target}:{classes[0]})"
        )
    elif others:
        text += (
            f"; what {target} defines that may be a model: {_listed(others)} "
            f"(give --model {target}:{others[0]})"
        )
    else:
        text += f"; after ':' name {FORMS}"
    return ModelSpecError(text)


# How many times the model's code forked this process while it loaded.
_forks = 0
_loading = False


def _count_fork() -> None:
    global _forks
    if _loading:
        _forks += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_parent=_count_fork)


def forks_while_loading() -> int:
    """How many times loading a model forked this process (``os.fork()``,
    multiprocessing's fork)."""
    return _forks


def load_model(spec: str, stage: Optional[Callable[[str], None]] = None) -> LoadedModel:
    """Resolves ``spec`` to a model, or raises ModelSpecError saying why not.

    ``stage``, if given, is told what runs next, in words: ``importing
    TARGET``, then ``building the model``.

    The model's code runs here: a copy of this process that it forks and
    that comes back (``os.fork()`` with both going on) ends at once, so that
    one process, the first, goes on as check's.
    """
    global _loading
    pid, _loading = os.getpid(), True
    try:
        return _load_model(spec, stage)
    finally:
        _loading = False
        if os.getpid() != pid:
            os._exit(0)


def _load_model(spec: str, stage: Optional[Callable[[str], None]]) -> LoadedModel:
    say = stage or (lambda _: None)
    kind, target, attr = parse(spec)
    if kind == "builtin":
        say("building the model")
        return _checked(spec, BUILTIN[target]())
    say(f"importing {target}")
    module = _import(spec, kind, target)
    say("building the model")
    if not hasattr(module, attr):
        raise _no_attribute(
            spec, target, attr, dir(module), model_classes(module), _others(module)
        )
    value = getattr(module, attr)
    if _is_eager_model(value):
        return _from_eager_model(spec, value)
    import torch

    what = f"its attribute '{attr}'{_default_note(spec)} is"
    if callable(value) and not isinstance(value, torch.nn.Module):
        needs = _needs_arguments(spec, value)
        if needs is not None:
            raise needs
        try:
            value = value()
        except Exception as e:  # noqa: B902 - the user's factory failed
            raise ModelSpecError(
                f"--model {spec}: calling {attr}() failed: {type(e).__name__}: "
                f"{_first_line(e)}"
            ) from e
        if _is_eager_model(value):
            return _from_eager_model(spec, value)
        what = f"{attr}() returned"
    try:
        return _checked(spec, value, what)
    except _NotAModel as e:
        hint = None if e.way_out else _hint(target, module, value)
        raise ModelSpecError(
            f"{e.text}; {hint or e.way_out or f'give {FORMS}'}"
        ) from None


def load(spec: str) -> Tuple[Any, Tuple[Any, ...]]:
    """``(module, example_inputs)`` for ``spec``; see :func:`load_model`."""
    model = load_model(spec)
    return model.module, model.args
