// SPDX-License-Identifier: MIT OR Apache-2.0
// The ResNet page's view of its WebAssembly module (kiln_demo.js, built from demo.cpp).
import {startModule} from './kiln_page.js';

/** Starts the module; resolves to the demo's functions. */
export async function loadDemo() {
  const {M, check, inHeap, outFloats, tryLoad, moduleBytes} = await startModule(KilnDemo);
  return {
    moduleBytes,
    /** Loads safetensors bytes; returns '' or Kiln's error message (the weights stay as they were). */
    tryLoad,
    /** Class probabilities [n * 10] of n images of 784 floats in [0, 1]. */
    predict: (pixels, n) => inHeap(pixels, 'HEAPF32', p => outFloats(n * 10, out => check(M._demo_predict(p, n, out)))),
  };
}
