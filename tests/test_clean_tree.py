"""The clean-tree check of conftest.py: `make test` must leave `git status --porcelain` as it found it
(every test writes under tmp_path), and the session fails when a test wrote into the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import git_tree_state, tree_changes

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(root, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_tree_state_sees_new_changed_and_removed_files(tmp_path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "kept.txt").write_text("a\n")
    (tmp_path / ".gitignore").write_text("out/\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    before = git_tree_state(tmp_path)
    assert before == ""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "ignored.bin").write_bytes(b"x")  # ignored outputs are not a change
    assert tree_changes(before, git_tree_state(tmp_path)) == []
    (tmp_path / "kept.txt").write_text("b\n")
    (tmp_path / "new" / "deep").mkdir(parents=True)
    (tmp_path / "new" / "deep" / "file.txt").write_text("c\n")
    assert tree_changes(before, git_tree_state(tmp_path)) == ["+  M kept.txt", "+ ?? new/deep/file.txt"]


def test_tree_state_is_none_outside_a_checkout(tmp_path) -> None:
    assert git_tree_state(tmp_path / "absent") is None


@pytest.mark.parametrize("workers", [[], ["-n", "2", "--dist", "loadfile"]], ids=["one-process", "make-test-workers"])
def test_a_test_writing_into_the_checkout_fails_the_session(tmp_path, workers) -> None:
    """A throwaway checkout with this conftest: a passing test that writes a file fails the run, in one process
    and with `make test`'s pytest workers (the check runs in the controller, around every worker)."""
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    shutil.copy(__file__.replace("test_clean_tree.py", "conftest.py"), root / "tests" / "conftest.py")
    (root / "tests" / "__init__.py").write_text("")
    (root / "tests" / "test_writes.py").write_text(
        "from pathlib import Path\n\n"
        "def test_writes():\n"
        "    (Path(__file__).resolve().parents[1] / 'stray.txt').write_text('x')\n"
    )
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *workers, "tests/test_writes.py"],
        cwd=root,
        check=False,
        capture_output=True,
        text=True,
    )
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout + done.stderr
    assert "1 passed" in done.stdout and "+ ?? stray.txt" in done.stdout
