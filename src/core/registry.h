// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// The tables of core that the layers above it fill (docs/architecture.md, "Targets"). Core names
// no backend and no decorator: the CPU library registers the CPU backend and its device names,
// the fusion library its decorator, and so on. The umbrella library (kiln::kiln, src/umbrella)
// defines kiln_register_layers(), which calls each layer's register function; core calls it
// once, before the first lookup of any table (so a device is known from the first line of main,
// static initialisers included). A program that links the layer libraries without the umbrella
// calls the register functions of the layers it links itself.
//
//   register_device("mydev", [] { return Device(my_backend()); });
//   Device::from_string("mydev");  // and "mydev" in Device::list(), KILN_DEVICE=mydev
#include "core/backend.h"

/// Defined by the umbrella library (src/umbrella/register_layers.cpp): registers every layer it
/// links. Referenced weakly by core, so a program without the umbrella links too.
extern "C" void kiln_register_layers();

namespace kiln {

/// Sets the CPU backend that cpu_backend() (core/backend.h) returns: Device::cpu() and the
/// fallback of ops a device does not support. cpu_backend() throws kiln::Error when no CPU
/// library registered one.
void register_cpu_backend(Backend* (*get)());

/// Names a device for Device::from_string, Device::list and KILN_DEVICE (listed in the order of
/// registration; registering a name again replaces its maker).
void register_device(const char* name, Device (*make)());
/// Names a kind of device of which a machine may have several or none (a GPU API): "name" and
/// "name:0" are device 0, "name:i" device i. `count()` says how many this machine has, asked
/// only when Device::list or from_string need it; Device::list names them ("name", "name:1",
/// ...); make(i) throws kiln::Error saying why when there is no device i.
void register_devices(const char* name, Device (*make)(int index), int (*count)());

/// Names a kind of device reached by an address ("remote:ws://host:port"): from_string hands
/// make the text after "name:". Device::list does not name it.
void register_device_address(const char* name, Device (*make)(const std::string& address));
/// Sets the maker of Device::remote (src/remote).
void register_remote_maker(Device (*make)(const std::string& url, const RemoteOptions& options));

/// Makes the decorator of a layer over `inner` (with_layer's maker).
using LayerMaker = Backend* (*)(Backend* inner, const void* ctx);
/// Sets the maker of a decorator layer (Layer::Fusion: the fused CPU of Device::cpu()).
void register_layer(Layer layer, LayerMaker make);
/// The maker of register_layer, or nullptr when no library registered one.
LayerMaker layer_maker(Layer layer);

// Each layer's register function, defined in its library; kiln_register_layers calls them in
// this order. They only call the register_* functions above (no lookups).
void register_cpu();     ///< src/backends/cpu (kiln::cpu): the CPU backend, "cpu", "cpu-plain"
void register_fusion();  ///< src/fusion (kiln::fusion): the fusion layer, "cpu-fusion"
void register_null();    ///< src/backends/null (kiln::cpu): "null"
void register_subset();  ///< src/backends/subset (kiln::cpu): "subset"
void register_vulkan();  ///< src/backends/vulkan (kiln::vulkan): "vulkan", "vulkan:1", ...
void register_remote();  ///< src/remote (kiln::remote): "remote:ws://...", Device::remote
void register_webgpu();  ///< src/backends/webgpu (kiln::webgpu, WebAssembly build): "webgpu"

}  // namespace kiln
