// SPDX-License-Identifier: MIT OR Apache-2.0
// Loaded first by the demos' test pages: collects console errors, uncaught errors and unhandled
// rejections in window.consoleErrors, which postResult (kiln_page.js) sends to the harness.
window.consoleErrors = [];
const kilnConsoleError = console.error;
console.error = (...a) => { window.consoleErrors.push(a.join(' ')); kilnConsoleError(...a); };
window.addEventListener('error', e => window.consoleErrors.push(e.message));
window.addEventListener('unhandledrejection', e => window.consoleErrors.push(String(e.reason)));
