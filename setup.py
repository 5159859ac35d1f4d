"""Package discovery that ``pyproject.toml`` cannot state alone.

Everything else is in ``pyproject.toml``. The shipped scenarios live in the repository's
top-level ``scenarios/`` folder and are installed as the ``infermodel_scenarios``
package, so that a scenario anywhere can ``extends = "infermodel:NAME"``; a package
outside the ``src`` and ``plugins`` roots needs an explicit package directory.
"""

from setuptools import find_packages, setup

PACKAGES = {name: f"src/{name.replace('.', '/')}" for name in find_packages("src", include=["infermodel*"])}
PACKAGES.update({name: f"plugins/{name.replace('.', '/')}"
                 for name in find_packages("plugins", include=["infermodel*"])})
PACKAGES["infermodel_scenarios"] = "scenarios"

setup(packages=list(PACKAGES), package_dir=PACKAGES)
