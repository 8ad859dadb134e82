"""Build hook (the project's metadata is in pyproject.toml): the packages are every folder of
tracefix/ that holds an ``__init__.py`` (a new family's folder ships without a second registry
line) plus the built-in knowledge entries, mapped from knowledge/ in pyproject.toml; and those
entries' diagnosis part ships pre-parsed, so that an installed tracefix does not import a TOML
parser and parse the same unchanged files on every run (tracefix/knowledge.py, HEADS_CACHE)."""
import sys
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py


class BuildPyWithKnowledgeCache(build_py):
    def run(self):
        super().run()
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from tracefix.knowledge import write_heads_cache

        entries = Path(self.build_lib) / "tracefix" / "entries"
        if entries.is_dir() and not self.dry_run:
            write_heads_cache(entries)


setup(packages=[*find_packages(include=["tracefix", "tracefix.*"]), "tracefix.entries"],
      cmdclass={"build_py": BuildPyWithKnowledgeCache})
