"""What DVC hashes for a stage's code deps (`src/slca/<package>` in dvc.yaml).

Python writes `__pycache__/*.pyc` beside every module it imports, unless PYTHONDONTWRITEBYTECODE is
set. In a checkout installed in editable mode (`make install`) those folders land inside the stage
deps, so without the repo's `.dvcignore` a later stage that imports one more module of a package
would change an earlier stage's dep hash, and a rerun with nothing changed would redo it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import yaml

from tests.conftest import REPO_ROOT

DVC = str(REPO_ROOT / ".venv" / "bin" / "dvc")


def test_bytecode_written_by_later_stages_leaves_earlier_stages_up_to_date(tmp_path):
    package = tmp_path / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "first.py").write_text("VALUE = 1\n")
    (package / "second.py").write_text("VALUE = 2\n")
    shutil.copy2(REPO_ROOT / ".dvcignore", tmp_path / ".dvcignore")
    write = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text(sys.argv[2])"
    (tmp_path / "dvc.yaml").write_text(
        yaml.safe_dump(
            {
                "stages": {
                    "first": {
                        "cmd": f"{sys.executable} -c 'import pkg.first; {write}' a.txt first",
                        "deps": ["src/pkg"],
                        "outs": ["a.txt"],
                    },
                    "second": {
                        "cmd": f"{sys.executable} -c 'import pkg.second; {write}' b.txt second",
                        "deps": ["src/pkg", "a.txt"],
                        "outs": ["b.txt"],
                    },
                }
            },
            sort_keys=False,
        )
    )
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tmp_path / "src")  # as an editable install imports from the checkout

    def dvc(*args: str) -> str:
        done = subprocess.run([DVC, *args], cwd=tmp_path, env=env, text=True, capture_output=True, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    dvc("init", "-q")
    dvc("repro")
    written = sorted(path.name for path in (package / "__pycache__").iterdir())
    assert [name.split(".")[0] for name in written] == ["__init__", "first", "second"], written
    assert dvc("status", "--json").strip() == "{}"
    lock = yaml.safe_load((tmp_path / "dvc.lock").read_text())["stages"]
    code = [dep for stage in ("first", "second") for dep in lock[stage]["deps"] if dep["path"] == "src/pkg"]
    assert [dep["nfiles"] for dep in code] == [3, 3]  # the .py files only
    assert dvc("repro").count("didn't change, skipping") == 2
