"""`pip install slca` (the core) in a fresh virtual environment: torch, transformers and TRL, none of the
pipeline's services, and the drop-in trainer's example runs there.

Slow (it installs torch, transformers and TRL into a new environment from the package index's local
files); the pipeline extra (`slca[pipeline]`) is what `make install` adds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

PIPELINE_ONLY = ("prefect", "mlflow", "dvc", "streamlit", "great_expectations", "matplotlib", "tree_sitter")


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_the_core_installs_alone_and_runs_the_trl_example(tmp_path):
    venv = tmp_path / "core"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update({"PIP_DISABLE_PIP_VERSION_CHECK": "1", "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"})

    def pip(*args: str) -> None:  # --no-compile: byte-compiling every module of torch is most of the install time
        done = subprocess.run(
            [python, "-m", "pip", "install", "--quiet", "--no-compile", *args],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert done.returncode == 0, done.stderr[-3000:]

    pip("torch==2.13.0")
    package = tmp_path / "package"  # a copy: building in the checkout would leave build/ behind
    shutil.copytree(REPO_ROOT / "src", package / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO_ROOT / name, package / name)
    pip(str(package))
    probe = (
        "import importlib.util, json; print(json.dumps({name: importlib.util.find_spec(name) is not None "
        f"for name in {list(PIPELINE_ONLY) + ['torch', 'transformers', 'trl', 'slca']!r}}}))"
    )
    found = json.loads(
        subprocess.run([python, "-c", probe], env=env, capture_output=True, text=True, check=True, cwd=tmp_path).stdout
    )
    assert found == {
        **dict.fromkeys(PIPELINE_ONLY, False),
        "torch": True,
        "transformers": True,
        "trl": True,
        "slca": True,
    }
    done = subprocess.run(
        [
            python,
            str(REPO_ROOT / "examples" / "trl_environment.py"),
            "--steps",
            "2",
            "--warm-up-steps",
            "40",
            "--out",
            str(tmp_path / "run"),
        ],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["estimator"] == "slca" and summary["steps"] == 2 and len(summary["r_tool"]) == 8
    assert sorted(p.name for p in (tmp_path / "run" / "models" / "trl-example-slca" / "samples").iterdir()) == [
        "step_000000.json",
        "step_000001.json",
    ]
    imported = subprocess.run(
        [
            python,
            "-c",
            (
                "import slca.trl, slca.credit, slca.rewards, slca.simulator, sys; "
                "print(sorted(m for m in sys.modules if m.split('.')[0] in "
                f"{PIPELINE_ONLY!r}))"
            ),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert imported.stdout.strip() == "[]"
