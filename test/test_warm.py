# Copyright (c) 2026 The executorch-device-guard authors.
# All rights reserved.
#
# This source code is licensed under the BSD-style license found in the
# LICENSE file in the root directory of this source tree.

"""The warm runner: a child forked per run behaves as a fresh ``python`` would.

The generic tests use a parent that preloads nothing heavy, so they take
seconds; the export tests use check's warm parents, stock and patched (torch
and ExecuTorch imported once).
"""

import concurrent.futures
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from conftest import REPO
from executorch_device_guard.check import warm
from executorch_device_guard.check.runner import Emitters, EMITTERS

pytestmark = pytest.mark.skipif(not warm.available(), reason="needs os.fork")

SEGFAULT = "import ctypes; ctypes.string_at(0)"


@pytest.fixture(scope="module")
def parent(tmp_path_factory) -> Iterator[warm.WarmParent]:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONFAULTHANDLER="1")
    with warm.WarmParent(env, ["json"], tmp_path_factory.mktemp("warm")) as p:
        p.wait_ready(60)
        yield p


def test_runs_like_python(parent: warm.WarmParent, tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(
        "import os, sys\nprint(sys.argv[1:], os.getcwd())\nsys.exit(int(sys.argv[1]))\n"
    )
    result = parent.run([str(script), "3", "x"], cwd=tmp_path)
    assert (result.returncode, result.stdout) == (3, f"['3', 'x'] {tmp_path}\n")

    result = parent.run(["-c", "import sys; print(sys.argv); raise KeyError('k')", "a"])
    assert result.returncode == 1 and result.stdout == "['-c', 'a']\n"
    assert result.stderr.endswith("KeyError: 'k'\n")
    assert "warm.py" not in result.stderr  # the traceback python would print

    result = parent.run(["-m", "json.tool"], cwd=tmp_path)
    assert result.returncode == 1  # no stdin: json.tool reports an error
    # call(): the function gets the argument list; an int it returns is the code.
    assert parent.call("builtins:len", ["a", "b"]).returncode == 2

    with pytest.raises(ValueError):
        parent.run(["-O", "-c", "pass"])


def test_a_segfault_kills_its_own_case_only(parent: warm.WarmParent) -> None:
    def case(i: int) -> subprocess.CompletedProcess:
        crash = SEGFAULT if i == 3 else ""
        code = f"import sys, time; time.sleep(0.2); print({i}); sys.stdout.flush(); {crash}"
        return parent.run(["-X", "faulthandler", "-c", code])

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(case, range(8)))
    for i, result in enumerate(results):
        assert result.stdout == f"{i}\n"
        if i == 3:
            assert result.returncode == -signal.SIGSEGV
            assert "Fatal Python error: Segmentation fault" in result.stderr
        else:
            assert (result.returncode, result.stderr) == (0, "")
    # The parent lives on.
    assert parent.run(["-c", "print('still here')"]).stdout == "still here\n"


def test_timeout_kills_the_child(parent: warm.WarmParent) -> None:
    with pytest.raises(subprocess.TimeoutExpired):
        parent.run(["-c", "import time; time.sleep(60)"], timeout=1)


def test_a_parent_that_cannot_start_says_why(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with warm.WarmParent(env, ["no_such_module_xyz"], tmp_path) as p:
        with pytest.raises(warm.WarmError, match="no_such_module_xyz"):
            p.wait_ready(60)


def test_a_threaded_parent_refuses_to_fork(tmp_path: Path) -> None:
    (tmp_path / "starts_a_thread.py").write_text(
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    with warm.WarmParent(env, ["json", "starts_a_thread", "csv"], tmp_path) as p:
        with pytest.raises(
            warm.WarmError,
            match=r"has 2 threads; forking it is not safe \(started by starts_a_thread\)",
        ):
            p.run(["-c", "pass"])


def test_a_parent_with_threads_falls_back_without_a_message(
    tmp_path: Path, capsys
) -> None:
    """No line the user cannot act on: the same results come from fresh
    interpreters, and ``notes`` (``check --verbose``) says why."""
    (tmp_path / "starts_a_thread.py").write_text(
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    )
    preload = ["json", "starts_a_thread"]
    with Emitters(REPO, preload=preload) as threaded:
        env = threaded.env("stock")
        env["PYTHONPATH"] += os.pathsep + str(tmp_path)
        threaded.env = lambda emitter: env  # type: ignore[method-assign]
        result = threaded.fork("stock", ["-c", "print('fresh')"])
        assert (result.returncode, result.stdout) == (0, "fresh\n")
        assert threaded.notes == [
            "the stock warm parent failed (the warm parent has 2 threads; forking "
            "it is not safe (started by starts_a_thread)); using a fresh "
            "interpreter per run"
        ]
    assert capsys.readouterr().err == ""


def test_a_child_can_be_forked_before_the_last_preload(tmp_path: Path) -> None:
    """``after``: a child forked once that preload step is done (check's
    model probe, once torch is imported), while the parent goes on."""
    (tmp_path / "slow_import.py").write_text("import time\ntime.sleep(120)\n")
    (tmp_path / "imported.py").write_text(
        "import sys\n\n\ndef main(names):\n"
        "    print(*(name in sys.modules for name in names))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    with warm.WarmParent(env, ["json", "slow_import"], tmp_path) as p:
        names = ["json", "slow_import"]
        result = p.call("imported:main", names, after="json", timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stdout == "True False\n"


def test_the_parent_asks_nvml_not_cuda(parent: warm.WarmParent) -> None:
    """torch.cuda.is_available(), which imported modules call, must not
    start CUDA (and its driver threads) in a parent that forks; nor may
    pyarrow's jemalloc start its background thread (seen on the H200)."""
    code = (
        "import os; print(os.environ.get('PYTORCH_NVML_BASED_CUDA_CHECK'), "
        "os.environ.get('JE_ARROW_MALLOC_CONF'))"
    )
    assert parent.run(["-c", code]).stdout == "1 background_thread:false\n"


@pytest.mark.parametrize("visible", [None, "", "1,0"])
def test_the_parent_sees_no_gpu_and_each_child_the_callers(
    tmp_path: Path, visible
) -> None:
    """On a machine with a GPU, asking whether CUDA is there starts a thread
    (CUDA's or NVML's), so the parent imports with CUDA_VISIBLE_DEVICES
    empty; each child runs with the caller's value (or none) again."""
    (tmp_path / "seen.py").write_text(
        "import os\nVISIBLE = os.environ.get('CUDA_VISIBLE_DEVICES')\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    code = (
        "import os, seen; "
        "print(repr(seen.VISIBLE), repr(os.environ.get('CUDA_VISIBLE_DEVICES')))"
    )
    with warm.WarmParent(env, ["seen"], tmp_path) as p:
        result = p.run(["-c", code])
    assert result.stdout == f"'' {visible!r}\n", result.stderr


def test_no_thread_in_the_warm_parents(emitters: Emitters) -> None:
    """Each side's parent has imported torch and ExecuTorch and is single-threaded."""
    for emitter in EMITTERS:
        code = (
            "import os, sys, threading; "
            "print(len(os.listdir('/proc/self/task')), threading.active_count(), "
            "'torch' in sys.modules, 'executorch.exir' in sys.modules)"
        )
        result = emitters.fork(emitter, ["-c", code])
        if sys.platform == "linux":
            assert result.stdout.split() == ["1", "1", "True", "True"], result.stderr


def test_export_crash_leaves_other_cases_intact(emitters: Emitters) -> None:
    """Concurrent exports in one warm parent: the crashing case is the only casualty."""
    cases = [("stock", "fake:cuda:0"), ("stock", "cpu"), ("patched", "fake:cuda:0")]
    cases += [("stock", "fake:mps:0"), ("patched", "cpu")]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(lambda c: emitters.export(c[0], c[1]), cases))
    by_case = dict(zip(cases, outcomes))
    for case in (("stock", "fake:cuda:0"), ("stock", "fake:mps:0")):
        assert by_case[case].returncode == -signal.SIGSEGV, by_case[case].stderr
        assert 'emit/_emitter.py", line 460' in by_case[case].stderr
    assert "is on device cuda:0," in by_case[("patched", "fake:cuda:0")].describe()
    stock, patched = by_case[("stock", "cpu")], by_case[("patched", "cpu")]
    assert stock.describe() == patched.describe() == "ok"
    assert stock.result["files"] == patched.result["files"]


def test_the_pattern_graphs_are_made_in_the_parent(emitters: Emitters) -> None:
    """XNNPACK's and Vulkan's pattern graphs, which every lowering would
    make again, are made once in the warm parent (warmup.py)."""
    code = (
        "from executorch.backends.xnnpack.partition.graphs import sdpa\n"
        "from executorch.backends.vulkan.patterns.pattern_registry import "
        "fusable_patterns\n"
        "kept = [getattr(e.get_graphs_fn, '_device_guard_kept', False) "
        "for e in fusable_patterns.values() if e.get_graphs_fn]\n"
        "print(sdpa.get_graphs.cache_info().currsize, len(kept) > 0 and all(kept))\n"
    )
    for emitter in EMITTERS:
        result = emitters.fork(emitter, ["-c", code])
        assert result.stdout == "1 True\n", result.stderr


def test_a_gpu_build_makes_no_pattern_graph_in_the_parent() -> None:
    """A GPU build of torch starts a driver thread for any export (on the
    H200): there warmup.main makes no graph, and only keeps Vulkan's."""
    code = (
        "import torch; torch.version.cuda = '13.0'\n"
        "from executorch_device_guard.check import warmup; warmup.main()\n"
        "from executorch.backends.xnnpack.partition.graphs import sdpa\n"
        "from executorch.backends.vulkan.patterns.pattern_registry import "
        "fusable_patterns\n"
        "kept = [getattr(e.get_graphs_fn, '_device_guard_kept', False) "
        "for e in fusable_patterns.values() if e.get_graphs_fn]\n"
        "print(sdpa.get_graphs.cache_info().currsize, len(kept) > 0 and all(kept))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True,
        timeout=300,
    )
    assert result.stdout == "0 True\n", result.stderr[-2000:]


def test_warm_and_fresh_children_give_the_same_cpu_bytes(emitters: Emitters) -> None:
    """The bytes that check compares do not depend on the runner (nor on
    the pattern graphs made in the warm parent)."""
    flows = ["emit", "xnnpack", "vulkan", "bundled"]
    with Emitters(REPO, warm=False) as fresh:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            started = list(
                pool.map(
                    lambda flow: fresh.export(
                        "stock", "cpu", "conv_batchnorm", flow=flow
                    ),
                    flows,
                )
            )
    for flow, reference in zip(flows, started):
        assert reference.describe() == "ok", reference.stderr
        for emitter in EMITTERS:
            forked = emitters.export(emitter, "cpu", "conv_batchnorm", flow=flow)
            assert forked.describe() == "ok", forked.stderr
            assert forked.result["files"] == reference.result["files"], flow


def test_a_failed_parent_falls_back_to_fresh_interpreters(capsys) -> None:
    with Emitters(REPO, preload=["no_such_module_xyz"]) as broken:
        result = broken.fork("patched", ["-c", "import sys; print(sys.argv)", "a"])
        assert (result.returncode, result.stdout) == (0, "['-c', 'a']\n")
        assert broken.call("stock", "builtins:len", ["a", "b", "c"]).returncode == 3
    note = capsys.readouterr().err
    assert "the patched warm parent failed" in note and "no_such_module_xyz" in note
    assert "using a fresh interpreter per run" in note


def test_a_real_cuda_export_forks_from_the_warm_parent(
    emitters: Emitters, monkeypatch
) -> None:
    """The warm parent never starts CUDA, so a real CUDA export is a child
    of it too (no fresh interpreter, whose imports took 13-24 s on the
    H200), and starts CUDA itself."""

    def fresh(*args, **kwargs):
        raise AssertionError("a fresh interpreter was started")

    monkeypatch.setattr(emitters, "run", fresh)
    outcome = emitters.export("stock", "cuda", flow="emit", timeout=120)
    assert outcome.result is not None, outcome.stderr
    if not torch_cuda_available():
        assert outcome.result["outcome"] == "tool-error", outcome.result
        assert "moving the model and its inputs to cuda" in outcome.result["message"]


def torch_cuda_available() -> bool:
    code = "import torch; print(torch.cuda.is_available())"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True
    )
    return result.stdout.strip() == "True"


def test_the_pattern_graphs_are_made_only_for_the_paths_that_match_them() -> None:
    """check --paths emitter bundled: no lowering, no pattern graphs to make."""
    from executorch_device_guard.check.runner import (
        EXPORT_PRELOAD,
        WARM_UP,
        export_preload,
    )

    assert export_preload(None) == EXPORT_PRELOAD
    assert export_preload(["emitter", "vulkan"]) == EXPORT_PRELOAD
    lean = export_preload(["emitter", "bundled"])
    assert WARM_UP not in lean and len(lean) == len(EXPORT_PRELOAD) - 1
