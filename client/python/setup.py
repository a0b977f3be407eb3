"""Build hook of the gpujoin Python package: generates the gRPC stubs from proto/
(build_stubs.py) into the build directory, so they are never committed.
Metadata lives in pyproject.toml."""
import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import build_stubs  # noqa: E402


class BuildPyWithStubs(build_py):
    """build_py that also writes gpujoin/v1/*.py, generated from proto/, into build_lib."""

    def run(self):
        super().run()
        if not self.dry_run:
            build_stubs.generate(self.build_lib)


setup(cmdclass={"build_py": BuildPyWithStubs})
