"""Packaging: the repository's top-level folders installed under ONE import package, `trainlog_debugger`.

Why a setup.py next to pyproject.toml: the mandated folders `agent/ tools/ eval/ prompts/` live at the repository
root, but installing them as top-level `tools`, `eval`, ... lets another distribution overwrite them in
site-packages and shadows a user's own folders of those names. setuptools' `package_dir` maps each folder to
`trainlog_debugger.<folder>`; the package list is found by walking the folders, so a new subpackage can never be
left out of the wheel (as `tools.rules` once was). `trainlog_debugger` itself is entry/: an `__init__` that holds
nothing and the `__main__` of `python -m trainlog_debugger` (a regular package: setuptools' editable finder maps a
package to a folder, not a lone module into a namespace). Everything else (metadata, dependencies, the console script) is in pyproject.toml.
"""

from setuptools import find_packages, setup

NS = "trainlog_debugger"
ROOTS = ("agent", "tools", "eval", "prompts")

found = find_packages(include=[*ROOTS, *(f"{r}.*" for r in ROOTS)])
setup(
    packages=[f"{NS}.{p}" for p in found],
    package_dir={NS: "entry", **{f"{NS}.{r}": r for r in ROOTS}},
    # `python -m trainlog_debugger`: the namespace package's one module of its own, entry/__main__.py
    py_modules=[f"{NS}.__main__"],
)
