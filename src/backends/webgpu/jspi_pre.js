// SPDX-License-Identifier: MIT OR Apache-2.0
// Prepended to every program that links the WebGPU backend (--pre-js): lets WebAssembly wait for
// the GPU through JavaScript Promise Integration (JSPI). The backend's JavaScript functions that
// return a Promise (marked kilnAsync in kiln_webgpu.js) become suspending imports, and the
// exports that may wait (main, and the names in Module.kilnAsyncExports) return a Promise.
// Without JSPI (node, older browsers) nothing changes and the WebGPU device reports itself
// absent. docs/web.md, "The WebGPU device".
var kilnAsyncDepth = 0;  // calls of wrapped exports in progress: imports may only wait inside one

if (typeof WebAssembly.Suspending === 'function' && typeof WebAssembly.promising === 'function' &&
    !Module['instantiateWasm']) {
  Module['instantiateWasm'] = function(imports, done) {
    var env = imports['env'];
    Object.keys(env).forEach(function(name) {
      if (env[name] && env[name].kilnAsync) env[name] = new WebAssembly.Suspending(env[name]);
    });
    var names = ['main'].concat(Module['kilnAsyncExports'] || []);
    function awaitable(name, f) {
      var p = WebAssembly.promising(f);
      var call = function() {
        ++kilnAsyncDepth;
        return p.apply(null, arguments).finally(function() { --kilnAsyncDepth; });
      };
      if (name !== 'main') return call;
      // main: the runtime stays up while it waits, and exits with its code when it returns.
      return function(argc, argv) {
        call(argc, argv).then(function(code) { exit(code); }).catch(function(e) {
          if (!(e instanceof ExitStatus) && e !== 'unwind') handleException(e);
        });
        throw 'unwind';
      };
    }
    WebAssembly.instantiateStreaming(fetch(wasmBinaryFile, {credentials: 'same-origin'}), imports)
        .then(function(r) {
          var exports = Object.assign({}, r.instance.exports);
          names.forEach(function(n) {
            if (typeof exports[n] === 'function') exports[n] = awaitable(n, r.instance.exports[n]);
          });
          done({exports: exports}, r.module);
        })
        .catch(function(e) { abort('instantiating ' + wasmBinaryFile + ': ' + e); });
    return {};
  };
  Module['kilnJspi'] = true;
}
