// SPDX-License-Identifier: MIT OR Apache-2.0
// The Fashion-MNIST page's interface (index.html) over demo_api.js.
import {CLASSES, loadDemo, readSamples} from './demo_api.js';
import {callQueue, deviceSwitch, drawSample, drawingPad, showTop} from './kiln_page.js';

const $ = id => document.getElementById(id);
const status = text => { $('status').textContent = text; };

let deviceName = 'CPU, WebAssembly';

/** Shows the top three classes of probs [10] and the time of the call. */
function show(probs, ms, what) {
  showTop($('classes'), probs, CLASSES);
  $('time').textContent = `${ms.toFixed(2)} ms per inference (${deviceName})`;
  $('what').textContent = what;
}
const serial = callQueue(message => status(`Error: ${message}`));

function plotLoss(losses) {
  if (!losses.length) return;
  const hi = Math.max(...losses), lo = Math.min(...losses, 0), w = 300, h = 90;
  const pts = losses.map((l, i) => `${(w * i / Math.max(1, losses.length - 1)).toFixed(1)},${(h - 5 - (h - 10) * (l - lo) / (hi - lo || 1)).toFixed(1)}`);
  $('loss').innerHTML = `<polyline fill="none" stroke="#e67e22" stroke-width="2" points="${pts.join(' ')}"/>
      <text x="4" y="12" font-size="10">loss ${losses[0].toFixed(3)} → ${losses[losses.length - 1].toFixed(3)}</text>`;
}

async function main() {
  const demo = await loadDemo();
  const samples = await readSamples('samples.bin');
  const got = await fetch('model.safetensors');
  if (got.ok) {
    const err = await demo.tryLoad(new Uint8Array(await got.arrayBuffer()), 'model.safetensors');
    status(err ? `model.safetensors was refused: ${err}` : 'Model: model.safetensors, served with the page.');
    if (err) await demo.testWeights();
  } else {
    await demo.testWeights();
    status('No model.safetensors beside the page: untrained test weights. Load the file `make run` saved (runs/fashion-mnist/model.safetensors).');
  }
  $('file').onchange = e => serial(async () => {
    const f = e.target.files[0];
    if (!f) return;
    const err = await demo.tryLoad(new Uint8Array(await f.arrayBuffer()), f.name);
    status(err ? `${f.name} was refused: ${err}` : `Model: ${f.name}`);
  });
  let last = null;  // the last classified image, classified again on a device switch
  const classify = (pixels, what) => serial(async () => {
    last = [pixels, what];
    const t0 = performance.now(), probs = await demo.predict(pixels, 1);
    show(probs, performance.now() - t0, what);
  });
  deviceSwitch(demo, serial, name => {
    deviceName = name;
    if (last) classify(...last);
  });
  // Samples: thumbnails, labels, fine-tuning choices.
  const chosen = new Set([0, 1, 2, 3, 4, 5, 6, 7]), labels = Array.from(samples.labels);
  for (let i = 0; i < 16; ++i) {
    const div = document.createElement('div'), c = document.createElement('canvas');
    div.className = 'sample';
    c.width = c.height = 28;
    drawSample(c, samples.pixels.subarray(784 * i, 784 * (i + 1)));
    c.classList.toggle('on', chosen.has(i));
    c.onclick = () => classify(samples.pixels.subarray(784 * i, 784 * (i + 1)), `sample ${i} (labelled ${CLASSES[labels[i]]})`);
    const sel = document.createElement('select');
    sel.innerHTML = CLASSES.map((n, k) => `<option value="${k}" ${k === labels[i] ? 'selected' : ''}>${n}</option>`).join('');
    sel.onchange = () => { labels[i] = Number(sel.value); };
    const tick = document.createElement('input');
    tick.type = 'checkbox';
    tick.checked = chosen.has(i);
    tick.onchange = () => { tick.checked ? chosen.add(i) : chosen.delete(i); c.classList.toggle('on', tick.checked); };
    div.append(c, document.createElement('br'), sel, tick);
    $('samples').append(div);
  }
  classify(samples.pixels.subarray(0, 784), `sample 0 (labelled ${CLASSES[labels[0]]})`);
  // Drawing.
  $('clear').onclick = drawingPad($('draw'), px => classify(px, 'your drawing'));
  // Fine-tuning, a few steps per frame so the page stays responsive.
  $('tune').onclick = () => serial(async () => {
    const ids = [...chosen];
    if (!ids.length) return status('Tick at least one sample to fine-tune on.');
    const px = new Float32Array(784 * ids.length);
    ids.forEach((s, k) => px.set(samples.pixels.subarray(784 * s, 784 * (s + 1)), 784 * k));
    const ys = ids.map(s => labels[s]), steps = Number($('steps').value), lr = Number($('lr').value), losses = [];
    $('tune').disabled = true;
    for (let s = 0; s < steps; s += 5) {
      losses.push(...await demo.fineTune(px, ys, Math.min(5, steps - s), lr));
      plotLoss(losses);
      $('tuneinfo').textContent = `step ${losses.length} of ${steps}`;
      await new Promise(r => setTimeout(r, 0));
    }
    $('tune').disabled = false;
    $('tuneinfo').textContent = `tuned on ${ids.length} image(s) for ${steps} steps`;
    classify(samples.pixels.subarray(784 * ids[0], 784 * (ids[0] + 1)), `sample ${ids[0]} after fine-tuning`);
  });
  $('download').onclick = () => serial(async () => {
    const url = URL.createObjectURL(new Blob([await demo.save()], {type: 'application/octet-stream'}));
    Object.assign(document.createElement('a'), {href: url, download: 'tuned.safetensors'}).click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  });
}

main().catch(e => status(`Error: ${e.message}`));
