// SPDX-License-Identifier: MIT OR Apache-2.0
// The ResNet page's view of its WebAssembly module (kiln_demo.js, built from demo.cpp).
import {startModule} from './kiln_page.js';

/** Starts the module; resolves to the demo's functions (tryLoad, predict, webgpuPresent,
 *  setDevice: see kiln_page.js). Calls that may wait for the WebGPU device return Promises. */
export async function loadDemo() {
  const {tryLoad, predict, webgpuPresent, setDevice, moduleBytes} =
      await startModule(KilnDemo, ['demo_set_device', 'demo_load', 'demo_predict']);
  return {moduleBytes, tryLoad, predict, webgpuPresent, setDevice};
}
