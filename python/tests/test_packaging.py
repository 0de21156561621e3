"""The package installs with pip on a machine with no package index, its build backend from Debian's setuptools."""
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def test_should_build_a_wheel_without_a_package_index(tmp_path):
    pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    if pip.returncode != 0:
        pytest.skip("pip is not installed for this python (Debian: python3-pip)")
    tree = tmp_path / "src"
    shutil.copytree(SOURCE, tree, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"))
    wheels = tmp_path / "wheels"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-index", "--no-build-isolation", "--no-deps",
                           "-w", str(wheels), str(tree)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    [wheel] = list(wheels.glob("netreduce-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for module in ("netreduce/__init__.py", "netreduce/session.py", "netreduce/hooks.py", "netreduce/sidecar.py",
                   "netreduce/sparse.py", "netreduce_verbs/ina.py"):
        assert module in names, names
