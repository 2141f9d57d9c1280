// SPDX-License-Identifier: MIT OR Apache-2.0
// What the demo pages share (copied beside each page by the build): the module's memory from
// JavaScript, the Fashion-MNIST samples and classes, the drawing canvas, the top-3 display.

/** Starts a demo module (the factory of -sMODULARIZE) and returns helpers over its memory.
 *  asyncExports: the module's functions that may wait for the WebGPU device: they return
 *  Promises (docs/web.md, "The WebGPU device"), and so do the helpers that call them. */
export async function startModule(factory, asyncExports = []) {
  const M = await factory({kilnAsyncExports: asyncExports});
  // Throws Kiln's message when a demo function returned -1.
  const check = rc => {
    if (rc !== 0) throw new Error(M.UTF8ToString(M._demo_error()));
  };
  // Runs f(pointer) (or the Promise it returns) over size bytes of the module's memory.
  const withBytes = (size, f, done) => {
    const p = M._malloc(Math.max(4, size));
    let r;
    try { r = f(p); } catch (e) { M._free(p); throw e; }
    if (r instanceof Promise) return r.then(v => done(p, v)).finally(() => M._free(p));
    try { return done(p, r); } finally { M._free(p); }
  };
  // Copies a typed array into the module's memory for the duration of f(pointer).
  const inHeap = (arr, heap, f) => withBytes(arr.byteLength, p => {
    M[heap].set(arr, p / arr.BYTES_PER_ELEMENT);
    return f(p);
  }, (p, v) => v);
  // n floats that f(pointer) writes, copied out.
  const outFloats = (n, f) => withBytes(n * 4, f, p => M.HEAPF32.slice(p / 4, p / 4 + n));
  // Loads safetensors bytes through demo_load; '' or Kiln's error message.
  const tryLoad = (bytes, name) => inHeap(bytes, 'HEAPU8', p =>
      inHeap(new TextEncoder().encode(name + '\0'), 'HEAPU8', q => M._demo_load(p, bytes.length, q)));
  const loadError = rc => rc === 0 ? '' : M.UTF8ToString(M._demo_error());
  const wasm = performance.getEntriesByType('resource').find(e => e.name.endsWith('.wasm'));
  // Calls demo function `name` (awaited when it returns a Promise) and checks its result.
  const call = async (name, ...args) => check(await M['_' + name](...args));
  return {
    M, check, inHeap, outFloats, call,
    /** Loads safetensors bytes; '' or Kiln's error message (a Promise where demo_load waits). */
    tryLoad: (bytes, name) => {
      const rc = tryLoad(bytes, name);
      return rc instanceof Promise ? rc.then(loadError) : loadError(rc);
    },
    /** Class probabilities [n * 10] of n images of 784 floats in [0, 1] (demo_predict), a Promise. */
    predict: (pixels, n) => inHeap(pixels, 'HEAPF32', p => outFloats(n * 10, out => call('demo_predict', p, n, out))),
    /** Whether this page can open a WebGPU device (navigator.gpu and WebAssembly JSPI). */
    webgpuPresent: () => Boolean(navigator.gpu && M.kilnJspi),
    /** Moves the network to WebGPU (true) or the CPU (false) (demo_set_device). */
    setDevice: webgpu => call('demo_set_device', webgpu ? 1 : 0),
    moduleBytes: wasm ? wasm.encodedBodySize : null,
  };
}

/** A queue for a page's calls of its module, which runs one at a time: serial(f) runs the async
 *  f after the calls queued before it; a failure goes to onError(message). */
export function callQueue(onError) {
  let queue = Promise.resolve();
  return f => (queue = queue.then(f).catch(e => onError(e.message)));
}

/** Binds the page's device switch (radio inputs named "device", values cpu and webgpu, and an
 *  element #gpunote): WebGPU is enabled where the page has it; a change moves the network
 *  through serial and then calls switched(label). */
export function deviceSwitch(demo, serial, switched) {
  const gpu = document.querySelector('input[name=device][value=webgpu]');
  gpu.disabled = !demo.webgpuPresent();
  document.getElementById('gpunote').textContent =
      gpu.disabled ? '(not in this browser: it needs WebGPU and WebAssembly JSPI)' : '';
  document.querySelectorAll('input[name=device]').forEach(r => r.onchange = () => serial(async () => {
    await demo.setDevice(r.value === 'webgpu');
    switched(r.value === 'webgpu' ? 'WebGPU' : 'CPU, WebAssembly');
  }));
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

/** Draws 28 x 28 pixels in [0, 1] onto a 28 x 28 canvas. */
export function drawSample(canvas, pixels) {
  const ctx = canvas.getContext('2d'), img = ctx.createImageData(28, 28);
  for (let i = 0; i < 784; ++i) {
    const v = Math.round(255 * pixels[i]);
    img.data.set([v, v, v, 255], 4 * i);
  }
  ctx.putImageData(img, 0, 0);
}

/** Makes the 280 x 280 canvas a drawing pad (white on black); onDrawn(pixels) after each
 *  stroke with 28 x 28 floats in [0, 1] (the mean of each 10 x 10 block). Returns clear(). */
export function drawingPad(canvas, onDrawn) {
  const ctx = canvas.getContext('2d');
  const clear = () => { ctx.fillStyle = '#000'; ctx.fillRect(0, 0, 280, 280); };
  const pixels = () => {
    const d = ctx.getImageData(0, 0, 280, 280).data, px = new Float32Array(784);
    for (let y = 0; y < 280; ++y)
      for (let x = 0; x < 280; ++x) px[Math.floor(y / 10) * 28 + Math.floor(x / 10)] += d[4 * (y * 280 + x)] / 255 / 100;
    return px;
  };
  clear();
  let down = false;
  canvas.onpointerdown = e => { down = true; ctx.beginPath(); ctx.moveTo(e.offsetX, e.offsetY); };
  canvas.onpointermove = e => {
    if (!down) return;
    ctx.strokeStyle = '#fff';
    ctx.lineWidth = 22;
    ctx.lineCap = 'round';
    ctx.lineTo(e.offsetX, e.offsetY);
    ctx.stroke();
  };
  canvas.onpointerup = () => { down = false; onDrawn(pixels()); };
  return clear;
}

/** The top three classes of probs [10] as bars, into element `el`. */
export function showTop(el, probs, names) {
  const order = [...probs.keys()].sort((a, b) => probs[b] - probs[a]).slice(0, 3);
  el.innerHTML = order.map(c => `<div class="cls"><span>${names[c]}</span>
      <div class="bar" style="width:${(200 * probs[c]).toFixed(1)}px"></div><span>${(100 * probs[c]).toFixed(1)}%</span></div>`).join('');
}

/** Reports what test.html computed (or its error) to the harness (scripts/browser_run.py),
 *  with the console errors the page collected in window.consoleErrors. */
export function postResult(promise) {
  return promise.then(r => r, e => ({error: String(e && e.stack || e)})).then(r => {
    r.console_errors = window.consoleErrors || [];
    return fetch('/result', {method: 'POST', body: JSON.stringify(r)});
  });
}

/** Times single-image calls of predictOne as a page makes them (awaiting each, for calls that
 *  return Promises): the first `reps` (V8's baseline code, Liftoff, while its optimizing
 *  compiler works in the background), then the best of 5 runs of `reps` after a second of calls
 *  (the steady state). Milliseconds per call. */
export async function timeCalls(predictOne, reps = 32) {
  const time32 = async () => {
    const t = performance.now();
    for (let i = 0; i < reps; ++i) await predictOne();
    return (performance.now() - t) / reps;
  };
  const first = await time32();
  for (const t = performance.now(); performance.now() - t < 1000;) await predictOne();
  const runs = [];
  for (let i = 0; i < 5; ++i) runs.push(await time32());
  return {first, steady: Math.min(...runs)};
}
