"""Where the wheel's files come from: the one packaging fact pyproject.toml cannot say.

Every package under ``sim/`` (and ``scenarios``) is found by setuptools' discovery, so a new subpackage
ships without an edit here. The repository's ``conf/`` (prices, cache rules, policy and sweep configs)
stays at the top of the checkout, where users and docs cite it, and is mapped into the wheel as
``sim/conf/``: an installed ctxsim reads its configuration from inside its own package, never from a
``conf/`` some other project left in site-packages. The embedded suite ships inside ``scenarios``, as in
the checkout. ``sim/util/paths.py`` finds both in a checkout and in a wheel.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["sim", "sim.*", "scenarios"]), "sim.conf"],
    package_dir={"sim.conf": "conf"},
    # the data files are the ones package_data lists, nothing else: without this, setuptools also takes
    # data files from the source manifest and warns, once per folder of conf/ and of the suite, that the
    # folder is not a listed package
    include_package_data=False,
    package_data={
        "sim.conf": ["**/*.yaml"],
        "scenarios": ["suite/*.jsonl", "suite/README.md", "trace.schema.json", "SCHEMA.md"],
    },
)
