"""The bug zoo: mutant implementations, each a correct bundled plugin with one
realistic bug injected, used to measure what the harness catches."""

from .injection import Mutant, build
from .mutants import MUTANTS, mutant

__all__ = ["MUTANTS", "Mutant", "build", "mutant"]
