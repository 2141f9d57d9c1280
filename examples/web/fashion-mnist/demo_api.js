// SPDX-License-Identifier: MIT OR Apache-2.0
// The page's view of the WebAssembly module (kiln_demo.js, built from demo.cpp): typed arrays
// in, typed arrays out; a failing call throws an Error carrying Kiln's message. Every call
// returns a Promise: on WebGPU the module waits for the device (docs/web.md, "The WebGPU
// device"). Await each call before the next: the module runs one at a time.
import {startModule} from './kiln_page.js';

export {CLASSES, readSamples} from './kiln_page.js';

/** The module's functions that may wait for the WebGPU device. */
const ASYNC = ['demo_set_device', 'demo_load', 'demo_test_weights', 'demo_predict', 'demo_fine_tune', 'demo_save'];

/** Starts the module; resolves to the demo's functions. */
export async function loadDemo() {
  const {M, call, inHeap, outFloats, tryLoad, predict, webgpuPresent, setDevice, moduleBytes} =
      await startModule(KilnDemo, ASYNC);
  return {
    moduleBytes, tryLoad, predict, webgpuPresent, setDevice,
    /** The deterministic test weights (see demo_core.h). */
    testWeights: () => call('demo_test_weights'),
    /** Fine-tunes the last layers on labelled images; resolves to the loss before each step. */
    fineTune: (pixels, labels, steps, lr) => inHeap(pixels, 'HEAPF32', p =>
        inHeap(Int32Array.from(labels), 'HEAP32', l =>
            outFloats(steps, out => call('demo_fine_tune', p, l, labels.length, steps, lr, out)))),
    /** The current weights as the bytes of a safetensors file. */
    save: async () => {
      await call('demo_save');
      const p = M._demo_saved();
      return M.HEAPU8.slice(p, p + M._demo_saved_size());
    },
  };
}
