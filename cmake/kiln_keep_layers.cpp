// SPDX-License-Identifier: MIT OR Apache-2.0
// Compiled into every target that links kiln::kiln (an interface source of the umbrella): a
// reference to kiln_register_layers() from the program's own code. It keeps the umbrella's
// registering object (src/umbrella/register_layers.cpp), and through it the backends and
// decorators of every layer, in the program: a static library's member and a shared library
// (under --as-needed) are linked only when the program's code refers to them. Core calls the
// function on its first lookup of a device (src/core/registry.h).
extern "C" void kiln_register_layers();
[[gnu::used]] static void (*const kiln_keep_layers)() = &kiln_register_layers;
