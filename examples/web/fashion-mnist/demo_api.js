// SPDX-License-Identifier: MIT OR Apache-2.0
// The page's view of the WebAssembly module (kiln_demo.js, built from demo.cpp): typed arrays
// in, typed arrays out; a failing call throws an Error carrying Kiln's message.
import {startModule} from './kiln_page.js';

export {CLASSES, readSamples} from './kiln_page.js';

/** Starts the module; resolves to the demo's functions. */
export async function loadDemo() {
  const {M, check, inHeap, outFloats, tryLoad, moduleBytes} = await startModule(KilnDemo);
  return {
    moduleBytes,
    /** The deterministic test weights (see demo_core.h). */
    testWeights: () => check(M._demo_test_weights()),
    /** Loads safetensors bytes; returns '' or Kiln's error message (the weights stay as they were). */
    tryLoad,
    /** Class probabilities [n * 10] of n images of 784 floats in [0, 1]. */
    predict: (pixels, n) => inHeap(pixels, 'HEAPF32', p => outFloats(n * 10, out => check(M._demo_predict(p, n, out)))),
    /** Fine-tunes the last layers on labelled images; returns the loss before each step. */
    fineTune: (pixels, labels, steps, lr) => inHeap(pixels, 'HEAPF32', p =>
        inHeap(Int32Array.from(labels), 'HEAP32', l =>
            outFloats(steps, out => check(M._demo_fine_tune(p, l, labels.length, steps, lr, out))))),
    /** The current weights as the bytes of a safetensors file. */
    save: () => {
      check(M._demo_save());
      const p = M._demo_saved();
      return M.HEAPU8.slice(p, p + M._demo_saved_size());
    },
  };
}
