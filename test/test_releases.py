# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""status, revert and run on real ExecuTorch releases other than 1.5.1.

Each release is pip's own install of its wheel from the package index
(``--no-deps --no-compile --target``) into a folder that the CLI's child
process puts first on its path, so the tool finds that release as it would
find it in an environment of its own; the environment's ExecuTorch is only
read. The wheels are kept in ``.releases/`` between runs. Python reads no
startup file in such a folder, so ``apply`` refuses there; what ``revert``
undoes here is an earlier version's in-place patching, each file's
patched text in the form that fits the release (``patch_release``).

- 1.0.0, the oldest release: its Vulkan builder takes the backport form
  (patches/backports), it ships the MPS backend. ``revert``, ``status`` and
  ``run`` need no torch, so this runs without the torch 2.9 it pins (a CUDA
  build of several GB): the exports on 1.0.0 are in
  scripts/release_matrix.py's record (docs/releases.md).
- 1.4.1, the newest release that ships the MPS backend, pins torch>=2.13.0a0:
  the environment's torch 2.13.0 is that. The MPS, runtime-input and
  custom-ops backports' tests fail as tests on stock and pass patched; the MPS
  and custom-op crash probes die with SIGSEGV at the read on stock and raise
  the clear error patched.

1.5.1 is the environment's own release (the other tests); here it is also
checked, in a virtual environment where ``apply`` works (``venv_site``), that
a target its RECORD does not list is not shipped when it is not there, and
served with the fix when it is; and the custom-ops backport's test and crash
probe run on it as on 1.4.1.
"""

import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, Iterable, Optional

import pytest

from conftest import REPO
from executorch_device_guard.installation.installed import executorch_root
from executorch_device_guard.patchset import apply_all, form, forms
from sites import (
    ALL_TARGETS,
    cli,
    make_site,
    one_line_error,
    record_hash,
    snapshot,
    tool,
    venv_site,
)

WHEELS = REPO / ".releases"  # not .whl/, which gpu/ installs whole
MPS = "backends/apple/mps/operators/node_visitor.py"
VULKAN = "backends/vulkan/serialization/vulkan_graph_builder.py"
RUNTIME = "extension/pybindings/portable_lib.py"
FORMS_1_0_0 = {
    "exir/emit/_emitter.py": "upstream",
    "devtools/bundled_program/core.py": "upstream",
    "backends/xnnpack/operators/node_visitor.py": "upstream",
    VULKAN: "v1.0.0-v1.1.0",
    MPS: "backport",
    RUNTIME: "backport",
    "extension/llm/custom_ops/custom_ops.py": "backport",
    "extension/llm/custom_ops/op_tile_crop_aot.py": "backport",
}


def _pip(*args: str) -> None:
    """pip with retries: the index is reachable from CI, but not always at once."""
    for attempt in range(3):
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
            capture_output=True,
            text=True,
        )
        if proc.returncode == 0:
            return
        time.sleep(5 * (attempt + 1))
    raise AssertionError(f"pip {' '.join(args)}:\n{proc.stdout}{proc.stderr}")


def release_site(folder: Path, version: str) -> Path:
    """``folder`` holding ExecuTorch ``version`` as pip installs it."""
    wheels = list(WHEELS.glob(f"executorch-{version}-*.whl"))
    if not wheels:
        _pip("download", "-q", "--no-deps", f"executorch=={version}", "-d", str(WHEELS))
        wheels = list(WHEELS.glob(f"executorch-{version}-*.whl"))
    _pip(
        "install",
        "-q",
        "--no-deps",
        "--no-compile",
        "--target",
        str(folder),
        str(wheels[0]),
    )
    return folder


def hashes(top: Path) -> Dict[str, str]:
    return {
        str(p.relative_to(top)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(top.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.fixture(scope="module")
def v1_0_0(tmp_path_factory) -> Path:
    return release_site(tmp_path_factory.mktemp("et-1.0.0") / "site", "1.0.0")


@pytest.fixture(scope="module")
def v1_4_1(tmp_path_factory) -> Path:
    return release_site(tmp_path_factory.mktemp("et-1.4.1") / "site", "1.4.1")


def patch_release(site: Path, rels: Iterable[str]) -> Dict[str, bytes]:
    """What an earlier version's in-place ``apply`` left in the release in
    ``site``: each target in ``rels`` holds its patched text, made as
    ``sites.PATCHED`` is (``apply_all``) with the patches of the form that
    fits its stock text (the release's backport where it takes one). The
    targets' bytes before."""
    stock = {}
    for rel in rels:
        path = site / "executorch" / rel
        stock[rel] = path.read_bytes()
        text = stock[rel].decode()
        name = form(text, ALL_TARGETS[rel])
        (fits,) = [f for f in forms(ALL_TARGETS[rel]) if f.name == name]
        path.write_bytes(apply_all(list(fits.patches), text).encode())
    return stock


def put_back(site: Path, files: Dict[str, bytes]) -> None:
    """The targets' bytes as ``patch_release`` found them: the module-scoped
    release is as pip installed it for the next test, whatever this one did."""
    for rel, data in files.items():
        (site / "executorch" / rel).write_bytes(data)


def forms_of(site: Path, rels: Iterable[str]) -> Dict[str, str]:
    """Target -> the name of the form of the change that fits its text."""
    return {
        rel: form(
            (site / "executorch" / rel).read_text(encoding="utf-8"), ALL_TARGETS[rel]
        )
        for rel in rels
    }


def status_lines(site: Path, run: Callable = cli) -> Dict[str, str]:
    """Target -> 'STATE' or 'STATE (WHY)' from ``status``; the form of a
    stock or patched file (``(form: upstream)``) left out (``status_forms``)."""
    result = run(site, "status")
    assert result.returncode == 0, result.stderr
    found = {}
    for line in result.stdout.splitlines()[1:]:
        m = re.fullmatch(
            r"  (stock|patched|unknown|missing|not shipped|not for this release) +"
            r"(\S+)(.*)",
            line,
        )
        if m:
            why = re.sub(r"^ \(form: [^)]*\)$", "", m.group(3))
            found[m.group(2)] = (m.group(1) + why).strip()
    return found


def status_forms(site: Path) -> Dict[str, str]:
    """Target -> the form that ``status`` names for it."""
    return dict(
        (rel, form)
        for rel, form in re.findall(
            r"^  (?:stock|patched) +(\S+) \(form: ([^)]*)\)$",
            cli(site, "status").stdout,
            re.M,
        )
    )


def test_1_0_0_status_finds_each_file_stock_in_the_form_that_fits_it(
    v1_0_0: Path,
) -> None:
    """Every target 1.0.0 ships is stock, each in its own form: the Vulkan
    builder in its backport's, the backport-only changes in theirs. A
    --target folder: status says that apply cannot turn the fix on there."""
    result = cli(v1_0_0, "status")
    assert result.stdout.startswith(f"ExecuTorch 1.0.0 at {v1_0_0 / 'executorch'}\n")
    assert status_lines(v1_0_0) == {rel: "stock" for rel in FORMS_1_0_0}
    assert forms_of(v1_0_0, FORMS_1_0_0) == FORMS_1_0_0
    assert status_forms(v1_0_0) == FORMS_1_0_0
    assert result.stdout.endswith(
        f"apply cannot turn the fix on here: {v1_0_0} is not a site-packages "
        f"folder of {sys.executable} (PYTHONPATH, or a --target folder), where "
        "Python reads no startup file. `run -- COMMAND` serves the fix to one "
        "command.\n"
    )


def test_1_0_0_revert_of_files_patched_in_place_is_byte_identical(
    v1_0_0: Path,
) -> None:
    """1.0.0 as an earlier version's apply left it, every target patched in
    its own form: revert writes back the bytes pip installed."""
    before = hashes(v1_0_0)
    stock = patch_release(v1_0_0, FORMS_1_0_0)
    try:
        assert status_lines(v1_0_0) == {rel: "patched" for rel in FORMS_1_0_0}
        changed = {k for k, v in hashes(v1_0_0).items() if before.get(k) != v}
        assert changed == {f"executorch/{rel}" for rel in FORMS_1_0_0}
        reverted = cli(v1_0_0, "revert")
        assert reverted.returncode == 0, reverted.stderr
        assert sorted(reverted.stdout.splitlines()) == sorted(
            f"restored {v1_0_0 / 'executorch' / rel}" for rel in FORMS_1_0_0
        )
        assert hashes(v1_0_0) == before
    finally:
        put_back(v1_0_0, stock)


def test_1_0_0_apply_refuses_a_target_folder(v1_0_0: Path) -> None:
    """pip's --target folder, found through PYTHONPATH: Python reads no
    startup file there, so apply refuses in one line that points to run, and
    writes nothing."""
    before = hashes(v1_0_0)
    one_line_error(
        cli(v1_0_0, "apply"),
        f"ExecuTorch at {v1_0_0 / 'executorch'} is found through PYTHONPATH or "
        "a --target folder",
        "use `executorch-device-guard run -- COMMAND`. Nothing was changed.",
    )
    assert sorted(p.name for p in v1_0_0.iterdir()) == [
        "bin",
        "executorch",
        "executorch-1.0.0.dist-info",
    ]
    assert hashes(v1_0_0) == before


def test_1_0_0_run_serves_the_backport_form_and_writes_nothing(
    v1_0_0: Path, tmp_path: Path
) -> None:
    """Under run, the command's import hook serves 1.0.0's Vulkan builder
    changed by its own form (its report, and the text it runs, say so); the
    release's files are as pip installed them."""
    before = hashes(v1_0_0)
    code = (
        "import importlib.util, sys\n"
        "name = 'executorch.backends.vulkan.serialization.vulkan_graph_builder'\n"
        "spec = importlib.util.find_spec(name)\n"
        "(hook,) = [f for f in sys.meta_path if getattr(f, MARK, 0)]\n"
        "print(spec.origin, hook.served[name][0])\n"
        "print('get_tensor_name,' in spec.loader.get_source(name))\n"
    ).replace("MARK", repr("executorch_device_guard_finder"))
    result = cli(v1_0_0, "run", "--", sys.executable, "-c", code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{v1_0_0 / 'executorch' / VULKAN} changed\nTrue\n"
    assert hashes(v1_0_0) == before


def test_1_0_0_deleted_file_that_record_lists_is_refused(v1_0_0: Path) -> None:
    """The MPS file, which RECORD lists, is gone: status says it is missing
    and that apply refuses; revert of the other files, patched in place by an
    earlier version, refuses and changes nothing."""
    mps = v1_0_0 / "executorch" / MPS
    data = mps.read_bytes()
    mps.unlink()
    stock = {}
    try:
        status = cli(v1_0_0, "status")
        assert status_lines(v1_0_0)[MPS] == "missing"
        assert (
            "Some files load without the fix (above), so apply refuses."
        ) in status.stdout, status.stdout
        stock = patch_release(v1_0_0, [rel for rel in FORMS_1_0_0 if rel != MPS])
        before = hashes(v1_0_0)
        one_line_error(cli(v1_0_0, "revert"), f"{mps} is missing")
        assert status_lines(v1_0_0)[MPS] == "missing"
        assert hashes(v1_0_0) == before
    finally:
        mps.write_bytes(data)
        put_back(v1_0_0, stock)


def test_1_0_0_mixed_release_forms(v1_0_0: Path, tmp_path: Path) -> None:
    """1.5.1's files with 1.0.0's Vulkan builder (RECORD listing it so), each
    patched in place in the form that fits it: revert restores each."""
    site = make_site(tmp_path / "site")
    vulkan = site / "executorch" / VULKAN
    old = (v1_0_0 / "executorch" / VULKAN).read_bytes()
    vulkan.write_bytes(old)
    (record,) = site.glob("executorch-*.dist-info/RECORD")
    record.write_text(
        re.sub(
            rf"^executorch/{re.escape(VULKAN)},.*$",
            f"executorch/{VULKAN},{record_hash(old)},{len(old)}",
            record.read_text(),
            flags=re.M,
        )
    )
    before = snapshot(tmp_path)
    assert status_lines(site)[VULKAN] == "stock"
    assert forms_of(site, [VULKAN]) == {VULKAN: "v1.0.0-v1.1.0"}
    shipped = [rel for rel, state in status_lines(site).items() if state == "stock"]
    patch_release(site, shipped)
    assert status_lines(site)[VULKAN] == "patched"
    assert forms_of(site, [VULKAN]) == {VULKAN: "v1.0.0-v1.1.0"}
    reverted = cli(site, "revert")
    assert reverted.returncode == 0, reverted.stderr
    assert f"restored {vulkan}\n" in reverted.stdout
    assert snapshot(tmp_path) == before


def test_1_5_1_target_not_in_record_but_there_is_served_with_the_fix(
    v1_0_0: Path, tmp_path: Path
) -> None:
    """RECORD says 1.5.1 ships no MPS backend, but its file is there: the
    tool never takes a file that is there for not shipped (issue 25, case 2).
    Python imports it, so the import hook judges it as it finds it, and apply
    serves it with the fix; no ExecuTorch file is written."""
    site = venv_site(tmp_path / "venv")
    planted = site / "executorch" / MPS
    planted.parent.mkdir(parents=True)
    planted.write_bytes((v1_0_0 / "executorch" / MPS).read_bytes())
    before = snapshot(tmp_path)
    assert status_lines(site, tool)[MPS] == "stock"
    applied = tool(site, "apply")
    assert applied.returncode == 0, applied.stderr
    assert f"served with the fix: {planted}\n" in applied.stdout
    added = set(snapshot(tmp_path)) - set(before)
    assert {Path(rel).name for rel in added} == {
        "executorch_device_guard.pth",
        "executorch_device_guard.start",
    }
    assert {k: v for k, v in snapshot(tmp_path).items() if k not in added} == before
    reverted = tool(site, "revert")
    assert reverted.returncode == 0, reverted.stderr
    assert snapshot(tmp_path) == before


def test_1_5_1_not_shipped_without_a_file(tmp_path: Path) -> None:
    site = make_site(tmp_path / "site")
    assert status_lines(site)[MPS] == "not shipped"


def test_1_5_1_backport_for_older_releases_is_left_alone(tmp_path: Path) -> None:
    """1.5.1 ships the runtime's pybindings module, which has upstream's fix:
    its backport, for older releases, is not served."""
    site = venv_site(tmp_path / "venv")
    data = (executorch_root() / RUNTIME).read_bytes()
    (site / "executorch" / RUNTIME).parent.mkdir(parents=True, exist_ok=True)
    (site / "executorch" / RUNTIME).write_bytes(data)
    (record,) = site.glob("executorch-*.dist-info/RECORD")
    with record.open("a") as f:
        f.write(f"executorch/{RUNTIME},{record_hash(data)},{len(data)}\n")
    before = snapshot(tmp_path)
    assert status_lines(site, tool)[RUNTIME] == (
        "not for this release (its backport is for ExecuTorch 1.0.0 to 1.4.1: "
        "left alone)"
    )
    applied = tool(site, "apply")
    assert applied.returncode == 0, applied.stderr
    assert "served with the fix: " in applied.stdout
    assert RUNTIME not in applied.stdout
    reverted = tool(site, "revert")
    assert reverted.returncode == 0, reverted.stderr
    assert snapshot(tmp_path) == before


def test_1_5_1_deleted_file_that_record_lists_is_refused(tmp_path: Path) -> None:
    site = venv_site(tmp_path / "venv")
    (record,) = site.glob("executorch-*.dist-info/RECORD")
    record.write_text(record.read_text() + f"executorch/{MPS},,\n")
    before = snapshot(tmp_path)
    assert status_lines(site, tool)[MPS] == "missing"
    one_line_error(
        tool(site, "apply"),
        f"{site / 'executorch' / MPS} would load without the fix (missing), so "
        "apply refuses. Nothing was changed.",
    )
    assert snapshot(tmp_path) == before


def _backport_test(name: str, site: Optional[Path], tmp_path: Path, patched: bool):
    """The backport's test on the release in ``site``, or with None on the
    environment's own."""
    test = REPO / "test" / "backports" / name
    cmd = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", str(test)]
    if patched:
        cmd = [sys.executable, "-m", "executorch_device_guard", "run", "--", *cmd]
    path = [str(site), str(REPO)] if site is not None else [str(REPO)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    return subprocess.run(
        cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900
    )


def test_1_4_1_mps_test_fails_as_a_test_on_stock_and_passes_patched(
    v1_4_1: Path, tmp_path: Path
) -> None:
    before = hashes(v1_4_1)
    stock = _backport_test("mps_device_constants.py", v1_4_1, tmp_path, patched=False)
    assert "Fatal Python error" not in stock.stdout + stock.stderr
    assert stock.returncode == 1, stock.stdout + stock.stderr
    outcomes = dict(re.findall(r"::(\w+) (PASSED|FAILED)", stock.stdout))
    assert outcomes == {
        "test_buffer_on_meta_raises": "FAILED",
        "test_cpu_model_serializes_weights": "PASSED",
        "test_parameter_on_meta_raises": "FAILED",
    }
    assert stock.stdout.count("ValueError: NULL pointer access") >= 2
    patched = _backport_test("mps_device_constants.py", v1_4_1, tmp_path, patched=True)
    assert patched.returncode == 0, patched.stdout + patched.stderr
    assert patched.stdout.count(" PASSED") == 3
    assert hashes(v1_4_1) == before


def test_1_4_1_revert_of_files_patched_in_place_is_byte_identical(
    v1_4_1: Path,
) -> None:
    """Every target 1.4.1 ships, the custom ops and the runtime backport among
    them, patched in place in the form that fits it: revert writes back the
    bytes pip installed."""
    expected = {**FORMS_1_0_0, VULKAN: "upstream"}
    assert status_lines(v1_4_1) == {rel: "stock" for rel in expected}
    assert forms_of(v1_4_1, expected) == expected
    before = hashes(v1_4_1)
    stock = patch_release(v1_4_1, expected)
    try:
        assert status_lines(v1_4_1) == {rel: "patched" for rel in expected}
        changed = {k for k, v in hashes(v1_4_1).items() if before.get(k) != v}
        assert changed == {f"executorch/{rel}" for rel in expected}
        reverted = cli(v1_4_1, "revert")
        assert reverted.returncode == 0, reverted.stderr
        assert hashes(v1_4_1) == before
    finally:
        put_back(v1_4_1, stock)


def test_1_4_1_runtime_test_fails_as_a_test_on_stock_and_passes_patched(
    v1_4_1: Path, tmp_path: Path
) -> None:
    before = hashes(v1_4_1)
    stock = _backport_test("runtime_inputs.py", v1_4_1, tmp_path, patched=False)
    assert "Fatal Python error" not in stock.stdout + stock.stderr
    assert stock.returncode == 1, stock.stdout + stock.stderr
    outcomes = dict(re.findall(r"::(\w+) (PASSED|FAILED)", stock.stdout))
    assert outcomes == {
        "test_cpu_input_runs": "PASSED",
        "test_method_input_on_device_raises": "FAILED",
        "test_module_input_on_device_raises": "FAILED",
    }
    patched = _backport_test("runtime_inputs.py", v1_4_1, tmp_path, patched=True)
    assert patched.returncode == 0, patched.stdout + patched.stderr
    assert patched.stdout.count(" PASSED") == 3
    assert hashes(v1_4_1) == before


def test_1_4_1_mps_read_crashes_stock_and_raises_patched(
    v1_4_1: Path, tmp_path: Path
) -> None:
    cmd = ["-X", "faulthandler", str(REPO / "test" / "crash_probes.py"), "mps_weight"]
    stock = cli(v1_4_1, *cmd, module=False, cwd=tmp_path, timeout=900)
    assert stock.returncode == -signal.SIGSEGV, stock.stderr
    innermost = stock.stderr.split("Current thread", 1)[1]
    assert re.search(
        r'executorch/backends/apple/mps/operators/node_visitor\.py", line 289 in '
        r"get_serialized_data",
        innermost.splitlines()[1],
    ), innermost
    patched = cli(v1_4_1, "run", "--", sys.executable, *cmd, cwd=tmp_path, timeout=900)
    assert patched.returncode == 1, patched.stderr
    assert (
        "RuntimeError: Constant tensor data for '0.weight' is on device cuda:0, "
        "but the MPS delegate serializes constant data from CPU memory. Move the "
        "model to CPU before lowering it to MPS.\n"
    ) in patched.stderr


@pytest.fixture(params=["1.4.1", "1.5.1"])
def custom_ops_release(request, tmp_path_factory) -> Optional[Path]:
    """1.4.1's folder, or None for the environment's own 1.5.1."""
    if request.param == "1.5.1":
        return None
    return request.getfixturevalue("v1_4_1")


def test_custom_ops_test_fails_as_a_test_on_stock_and_passes_patched(
    custom_ops_release: Optional[Path], tmp_path: Path
) -> None:
    site = custom_ops_release
    root = (site or executorch_root().parent) / "executorch"
    before = hashes(root)
    name = "custom_ops_device_tensors.py"
    stock = _backport_test(name, site, tmp_path, patched=False)
    assert "Fatal Python error" not in stock.stdout + stock.stderr
    assert stock.returncode == 1, stock.stdout + stock.stderr
    outcomes = dict(re.findall(r"::(\w+) (PASSED|FAILED|SKIPPED)", stock.stdout))
    assert outcomes == {
        "test_cpu_tensors_run": "PASSED",
        "test_cuda_tensor_raises": "SKIPPED",
        "test_tensor_on_device_raises": "FAILED",
    }
    assert "AssertionError: RuntimeError not raised" in stock.stdout
    patched = _backport_test(name, site, tmp_path, patched=True)
    assert patched.returncode == 0, patched.stdout + patched.stderr
    assert patched.stdout.count(" PASSED") == 2
    assert hashes(root) == before


def test_custom_op_read_crashes_stock_and_raises_patched(
    custom_ops_release: Optional[Path], tmp_path: Path
) -> None:
    site = custom_ops_release or tmp_path / "no-release"
    cmd = [
        "-X",
        "faulthandler",
        str(REPO / "test" / "crash_probes.py"),
        "custom_op_update_cache",
    ]
    stock = cli(site, *cmd, module=False, cwd=tmp_path, timeout=900)
    assert stock.returncode == -signal.SIGSEGV, stock.stderr
    innermost = stock.stderr.split("Current thread", 1)[1]
    # A C++ kernel's read: the innermost Python frame is the op's call.
    assert re.search(
        r'torch/_ops\.py", line \d+ in __call__', innermost.splitlines()[1]
    ), innermost
    patched = cli(site, "run", "--", sys.executable, *cmd, cwd=tmp_path, timeout=900)
    assert patched.returncode == 1, patched.stderr
    assert (
        "RuntimeError: llama::update_cache: argument 'value' is on device cuda:0, "
        "but this op runs on CPU only. Run the model on CPU, or leave the custom op "
        "source transforms off to run it on cuda.\n"
    ) in patched.stderr
