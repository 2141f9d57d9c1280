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
  const {M, check, inHeap, outFloats, tryLoad, moduleBytes} = await startModule(KilnDemo, ASYNC);
  return {
    moduleBytes,
    /** Whether this page can open a WebGPU device (navigator.gpu and WebAssembly JSPI). */
    webgpuPresent: () => Boolean(navigator.gpu && M.kilnJspi),
    /** Moves the network to WebGPU (true) or the CPU (false). */
    setDevice: async webgpu => check(await M._demo_set_device(webgpu ? 1 : 0)),
    /** The deterministic test weights (see demo_core.h). */
    testWeights: async () => check(await M._demo_test_weights()),
    /** Loads safetensors bytes; resolves to '' or Kiln's error message (the weights stay as they were). */
    tryLoad,
    /** Class probabilities [n * 10] of n images of 784 floats in [0, 1]. */
    predict: (pixels, n) => inHeap(pixels, 'HEAPF32', p => outFloats(n * 10, out => Promise.resolve(M._demo_predict(p, n, out)).then(check))),
    /** Fine-tunes the last layers on labelled images; resolves to the loss before each step. */
    fineTune: (pixels, labels, steps, lr) => inHeap(pixels, 'HEAPF32', p =>
        inHeap(Int32Array.from(labels), 'HEAP32', l =>
            outFloats(steps, out => Promise.resolve(M._demo_fine_tune(p, l, labels.length, steps, lr, out)).then(check)))),
    /** The current weights as the bytes of a safetensors file. */
    save: async () => {
      check(await M._demo_save());
      const p = M._demo_saved();
      return M.HEAPU8.slice(p, p + M._demo_saved_size());
    },
  };
}
