"""A griffe extension for the API reference: `tfdqn.train` is both the function the package's __init__ defines (the
Python API) and the module `tfdqn/train.py` (the command line, `python -m tfdqn.train`). Griffe lets the submodule
shadow the function; this puts the function back at `tfdqn.train`, so the reference documents what `from tfdqn
import train` gives. Only the site's build loads it (mkdocs.yml)."""

from __future__ import annotations

import griffe


class KeepPackageFunctions(griffe.Extension):
    """Functions a package's __init__ defines win over its submodules of the same name, as `from PACKAGE import`."""

    def __init__(self) -> None:
        self.functions: list[griffe.Function] = []

    def on_function_instance(self, *, func: griffe.Function, **kwargs) -> None:
        if func.parent is not None and func.parent.is_module and func.parent.is_init_module:
            self.functions.append(func)

    def on_package(self, *, pkg: griffe.Module, **kwargs) -> None:
        for func in self.functions:
            if func.parent is pkg and pkg.members.get(func.name) is not func:
                pkg.set_member(func.name, func)
