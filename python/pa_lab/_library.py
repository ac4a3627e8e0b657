"""Finding and loading the compiled ops (libpa_lab_torch.so).

Where it is looked for, first match wins:
  1. the path in the environment variable PA_LAB_LIBRARY;
  2. python/ of a CMake build folder of this checkout whose name starts with
     "build" (build/, build-release/, ...), newest first.

On the GPU machine the library crashes inside libstdc++ (std::ostringstream,
the first time a plan is described) unless Python starts with the C++
runtime preloaded, LD_PRELOAD=$(c++ -print-file-name=libstdc++.so.6): the
same file Python loads anyway, but then first in symbol lookup, ahead of
PyTorch's libraries. Why the order matters there was not found; the README
and scripts/device/torch_ops.sh preload it.
"""
import glob
import os

import torch

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def library_path() -> str:
    env = os.environ.get("PA_LAB_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise FileNotFoundError(f"PA_LAB_LIBRARY={env}: no such file")
        return env
    found = glob.glob(os.path.join(_REPO, "build*", "python", "libpa_lab_torch.so"))
    if not found:
        raise FileNotFoundError(
            "libpa_lab_torch.so not found: build the lab with CMake on a machine with PyTorch "
            "(cmake -S . -B build && cmake --build build --target pa_lab_torch), "
            "or set PA_LAB_LIBRARY to the library's path")
    return max(found, key=os.path.getmtime)


def load() -> str:
    path = library_path()
    torch.ops.load_library(path)
    return path
