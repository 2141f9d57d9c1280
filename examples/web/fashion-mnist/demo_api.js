// SPDX-License-Identifier: MIT OR Apache-2.0
// The page's view of the WebAssembly module (kiln_demo.js, built from demo.cpp): typed arrays
// in, typed arrays out; a failing call throws an Error carrying Kiln's message.

/** Starts the module; resolves to the demo's functions. */
export async function loadDemo() {
  const M = await KilnDemo();  // the factory kiln_demo.js defines (-sMODULARIZE)
  const check = rc => {
    if (rc !== 0) throw new Error(M.UTF8ToString(M._demo_error()));
  };
  // Copies a typed array into the module's memory for the duration of f(pointer).
  const inHeap = (arr, heap, f) => {
    const p = M._malloc(Math.max(4, arr.byteLength));
    M[heap].set(arr, p / arr.BYTES_PER_ELEMENT);
    try { return f(p); } finally { M._free(p); }
  };
  const outFloats = (n, f) => {
    const p = M._malloc(Math.max(4, n * 4));
    try { f(p); return M.HEAPF32.slice(p / 4, p / 4 + n); } finally { M._free(p); }
  };
  const wasm = performance.getEntriesByType('resource').find(e => e.name.endsWith('.wasm'));
  return {
    moduleBytes: wasm ? wasm.encodedBodySize : null,
    /** The deterministic test weights (see demo_core.h). */
    testWeights: () => check(M._demo_test_weights()),
    /** Loads safetensors bytes; returns '' or Kiln's error message (the weights stay as they were). */
    tryLoad: (bytes, name) => inHeap(bytes, 'HEAPU8', p =>
        M.ccall('demo_load', 'number', ['number', 'number', 'string'], [p, bytes.length, name]) === 0
            ? '' : M.UTF8ToString(M._demo_error())),
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

/** The sample images (samples.bin): 16 labels, then 16 images of 28 x 28 bytes. */
export async function readSamples(url) {
  const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
  const n = 16, labels = bytes.slice(0, n), pixels = new Float32Array(n * 784);
  for (let i = 0; i < n * 784; ++i) pixels[i] = bytes[n + i] / 255;
  return {labels, pixels};
}

/** The ten classes of Fashion-MNIST. */
export const CLASSES = ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt', 'Sneaker', 'Bag',
                        'Ankle boot'];
