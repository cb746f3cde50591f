"""The shuffled test order (tests/order.py): seeded, files kept together, every test kept."""

from __future__ import annotations

import subprocess
import sys

from eric.config import PROJECT_ROOT


def _run(tmp_path, *args: str) -> str:
    for name in ("a", "b", "c"):
        (tmp_path / f"test_{name}.py").write_text("".join(f"def test_{name}{k}():\n    pass\n" for k in range(5)))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.order", "-p", "no:cacheprovider",
                           "-c", "/dev/null", "--rootdir", str(tmp_path), *args, str(tmp_path)],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, check=True).stdout


def _collected(tmp_path, *args: str) -> list[str]:
    out = _run(tmp_path, "--collect-only", "-q", *args)
    return [line.split("::")[1] for line in out.splitlines() if "::" in line]


def test_a_seed_gives_one_shuffled_order_with_every_test_and_files_together(tmp_path):
    plain = _collected(tmp_path)
    first, again = _collected(tmp_path, "--random-order", "7"), _collected(tmp_path, "--random-order", "7")
    assert first == again and sorted(first) == sorted(plain) and len(plain) == 15
    assert first != plain and first != _collected(tmp_path, "--random-order", "8")
    assert "shuffled with seed 7" in _run(tmp_path, "--random-order", "7", "-q")
    files = [name[5] for name in first]  # test_a3 -> "a"
    assert [f for k, f in enumerate(files) if k == 0 or files[k - 1] != f] == sorted(set(files), key=files.index)


def test_off_keeps_the_files_own_order(tmp_path):
    assert _collected(tmp_path, "--random-order", "off") == _collected(tmp_path)
    assert "shuffled" not in _run(tmp_path, "--random-order", "off", "-q")
