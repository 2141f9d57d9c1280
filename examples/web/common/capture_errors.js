// SPDX-License-Identifier: MIT OR Apache-2.0
// Loaded first by the demos' test pages: collects console errors, uncaught errors and unhandled
// rejections in window.consoleErrors, which postResult (kiln_page.js) sends to the harness. A
// script or module that fails to load (the page's code never runs then) is reported to the
// harness at once, so the test fails with its name instead of waiting for its time limit.
window.consoleErrors = [];
const kilnConsoleError = console.error;
console.error = (...a) => { window.consoleErrors.push(a.join(' ')); kilnConsoleError(...a); };
window.addEventListener('error', e => {
  const el = e.target;
  if (el && el !== window && (el.tagName === 'SCRIPT' || el.tagName === 'LINK')) {
    fetch('/result', {method: 'POST', body: JSON.stringify({error: `failed to load ${el.src || el.href || 'the page\'s module script'} or a module it imports`})});
  } else {
    window.consoleErrors.push(e.message);
  }
}, true);
window.addEventListener('unhandledrejection', e => window.consoleErrors.push(String(e.reason)));
