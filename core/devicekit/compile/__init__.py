"""Compilers and the compile cache."""

from ..errors import CompileError
from .cache import CacheKey, CompileCache, cache_clear, cache_info, default_cache
from .compiler import CompiledSpec, Compiler

__all__ = ["CacheKey", "CompileCache", "CompileError", "CompiledSpec", "Compiler", "cache_clear", "cache_info",
           "default_cache"]
