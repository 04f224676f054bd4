"""The folders the project was designed with (jobs/, spark/, models/, evaluation/, cockpit/, synthcorpus/) install
under the citeflow namespace: `citeflow.jobs`, `citeflow.spark`, ..., so that site-packages gains one name,
`citeflow`, and a user's own `models/` or `spark/` folder never shadows one of them. Everything else is in
setup.cfg."""

from setuptools import find_packages, setup

FOLDERS = ("jobs", "spark", "models", "evaluation", "cockpit", "synthcorpus")

setup(
    packages=[
        *find_packages(include=["citeflow", "citeflow.*"]),
        *(f"citeflow.{p}" for p in find_packages(include=[f for f in FOLDERS] + [f"{f}.*" for f in FOLDERS])),
    ],
    package_dir={"citeflow": "citeflow", **{f"citeflow.{f}": f for f in FOLDERS}},
)
