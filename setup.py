"""Packaging: the repository's top-level folders installed under ONE import package, `trainlog_debugger`.

Why a setup.py next to pyproject.toml: the mandated folders `agent/ tools/ eval/ prompts/` live at the repository
root, but installing them as top-level `tools`, `eval`, ... lets another distribution overwrite them in
site-packages and shadows a user's own folders of those names. setuptools' `package_dir` maps each folder to
`trainlog_debugger.<folder>`; the package list is found by walking the folders, so a new subpackage can never be
left out of the wheel (as `tools.rules` once was). `trainlog_debugger` itself is a namespace package (PEP 420): it
holds nothing of its own. Everything else (metadata, dependencies, the console script) is in pyproject.toml.
"""

from setuptools import find_packages, setup

NS = "trainlog_debugger"
ROOTS = ("agent", "tools", "eval", "prompts")

found = find_packages(include=[*ROOTS, *(f"{r}.*" for r in ROOTS)])
setup(
    packages=[f"{NS}.{p}" for p in found],
    package_dir={f"{NS}.{r}": r for r in ROOTS},
)
