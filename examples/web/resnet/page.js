// SPDX-License-Identifier: MIT OR Apache-2.0
// The ResNet page's interface (index.html) over demo_api.js.
import {loadDemo} from './demo_api.js';
import {CLASSES, callQueue, deviceSwitch, drawSample, drawingPad, readSamples, showTop} from './kiln_page.js';

const $ = id => document.getElementById(id);
const status = text => { $('status').textContent = text; };
const serial = callQueue(message => status(`Error: ${message}`));
let deviceName = 'CPU, WebAssembly';

async function main() {
  const demo = await loadDemo();
  const samples = await readSamples('samples.bin');
  const got = await fetch('model.safetensors');
  if (!got.ok) throw new Error('model.safetensors is missing beside the page (the build copies it there)');
  const err = await demo.tryLoad(new Uint8Array(await got.arrayBuffer()), 'model.safetensors');
  if (err) throw new Error(`model.safetensors was refused: ${err}`);
  status('Model: model.safetensors, the weights kiln-onnx wrote beside the generated code.');
  let last = null;  // the last classified image, classified again on a device switch
  const classify = (pixels, what) => serial(async () => {
    last = [pixels, what];
    const t0 = performance.now(), probs = await demo.predict(pixels, 1);
    showTop($('classes'), probs, CLASSES);
    $('time').textContent = `${(performance.now() - t0).toFixed(2)} ms per inference (${deviceName})`;
    $('what').textContent = what;
  });
  deviceSwitch(demo, serial, name => {
    deviceName = name;
    if (last) classify(...last);
  });
  // The 16 samples in one batch, each with the model's answer.
  const probs = await demo.predict(samples.pixels, 16);
  let right = 0;
  for (let i = 0; i < 16; ++i) {
    const p = probs.subarray(10 * i, 10 * (i + 1)), best = p.indexOf(Math.max(...p)), label = samples.labels[i];
    right += best === label;
    const div = document.createElement('div'), c = document.createElement('canvas');
    div.className = 'sample';
    c.width = c.height = 28;
    const px = samples.pixels.subarray(784 * i, 784 * (i + 1));
    drawSample(c, px);
    c.onclick = () => classify(px, `sample ${i} (labelled ${CLASSES[label]})`);
    const answer = document.createElement('div');
    answer.textContent = CLASSES[best];
    answer.className = best === label ? '' : 'wrong';
    answer.title = `labelled ${CLASSES[label]}`;
    div.append(c, answer);
    $('samples').append(div);
  }
  $('samples').insertAdjacentHTML('afterend', `<div class="muted">${right} of 16 right</div>`);
  classify(samples.pixels.subarray(0, 784), `sample 0 (labelled ${CLASSES[samples.labels[0]]})`);
  $('clear').onclick = drawingPad($('draw'), px => classify(px, 'your drawing'));
}

main().catch(e => status(`Error: ${e.message}`));
