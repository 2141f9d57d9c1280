// SPDX-License-Identifier: MIT OR Apache-2.0
// The WebGPU backend's JavaScript side (--js-library; context.cpp calls these functions): the
// page's GPUDevice, buffers and pipelines by integer id, one open compute pass that records
// dispatches until the next read or sync, and those waits, which return Promises that JSPI
// suspends WebAssembly on (jspi_pre.js). Errors of recorded work are collected in error scopes
// and reported by the next read or sync. Strings go back through (ptr, cap) buffers.
mergeInto(LibraryManager.library, {
  $KilnGPU: {
    device: null,
    objects: [null],      // id -> GPUBuffer or {pipeline, layout}
    free: [],             // ids to reuse
    used: null,           // the buffers the open batch uses (a Set, made by open: a library's
                          // objects are written out as literals)
    doomed: [],           // buffers released while the open batch uses them
    arena: [],            // the open batch's parameter bytes (Uint8Array parts)
    arenaBytes: 0,
    pending: [],          // dispatches waiting for the arena: {pipeline, entries, groups}
    errors: '',           // uncaptured errors
    add: function(o) {
      var id = KilnGPU.free.length ? KilnGPU.free.pop() : KilnGPU.objects.length;
      KilnGPU.objects[id] = o;
      return id;
    },
    text: function(s, ptr, cap) {
      if (cap > 0) stringToUTF8(String(s), ptr, cap);
    },
    // Parameters of a dispatch in the batch's arena, each at a multiple of 256 bytes (WebGPU's
    // minimum offset alignment for storage and uniform bindings).
    param: function(ptr, n) {
      var at = KilnGPU.arenaBytes;
      var size = Math.max(16, Math.ceil(n / 16) * 16);
      var bytes = new Uint8Array(size);
      bytes.set(HEAPU8.subarray(ptr, ptr + n));
      KilnGPU.arena.push({at: at, bytes: bytes});
      KilnGPU.arenaBytes += Math.ceil(size / 256) * 256;
      return {at: at, size: size};
    },
    // Encodes the dispatches recorded since the last flush (their parameters now in one buffer)
    // and submits the batch.
    flush: function() {
      var K = KilnGPU, d = K.device;
      if (!K.pending.length) return;
      var arena = null;
      if (K.arenaBytes) {
        arena = d.createBuffer({size: K.arenaBytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST});
        var all = new Uint8Array(K.arenaBytes);
        K.arena.forEach(function(p) { all.set(p.bytes, p.at); });
        d.queue.writeBuffer(arena, 0, all);
      }
      var enc = d.createCommandEncoder();
      var pass = null;
      K.pending.forEach(function(p) {
        if (p.copy) {
          if (pass) { pass.end(); pass = null; }
          enc.copyBufferToBuffer(p.copy[0], 0, p.copy[1], 0, p.copy[2]);
          return;
        }
        if (!pass) pass = enc.beginComputePass();
        var entries = p.entries.map(function(e) {
          if (!e.param) return e;
          return {binding: e.binding, resource: {buffer: arena, offset: e.param.at, size: e.param.size}};
        });
        pass.setPipeline(p.pipeline.pipeline);
        pass.setBindGroup(0, d.createBindGroup({layout: p.pipeline.layout, entries: entries}));
        pass.dispatchWorkgroups(p.groups[0], p.groups[1], p.groups[2]);
      });
      if (pass) pass.end();
      d.queue.submit([enc.finish()]);
      if (arena) arena.destroy();
      K.doomed.forEach(function(b) { b.destroy(); });
      K.pending = []; K.arena = []; K.arenaBytes = 0; K.used.clear(); K.doomed = [];
    },
    // Waits for the submitted work and returns the errors it raised ('' for none), opening new
    // error scopes.
    settle: async function() {
      var d = KilnGPU.device;
      await d.queue.onSubmittedWorkDone();
      var oom = await d.popErrorScope();
      var invalid = await d.popErrorScope();
      d.pushErrorScope('validation');
      d.pushErrorScope('out-of-memory');
      var msg = (invalid ? invalid.message + '\n' : '') + (oom ? 'out of memory: ' + oom.message + '\n' : '') + KilnGPU.errors;
      KilnGPU.errors = '';
      return msg.trim();
    },
  },

  kiln_wgpu_present__deps: ['$KilnGPU'],
  /// 1 when this page can open a WebGPU device (navigator.gpu and JSPI), else 0.
  kiln_wgpu_present: function() {
    return (typeof navigator !== 'undefined' && navigator.gpu && Module['kilnJspi']) ? 1 : 0;
  },

  kiln_wgpu_open__deps: ['$KilnGPU'],
  /// Opens the adapter's device with its highest limits; 0 and a description in msg, or -1 and
  /// the reason. limits: u32 out[6] (storage buffer binding size, buffer size, storage buffers per
  /// stage, workgroup storage bytes, invocations per group, f16 feature).
  kiln_wgpu_open: function(limits, msg, cap) {
    if (!kilnAsyncDepth) {
      KilnGPU.text('the WebGPU device must be opened inside a call that can wait (an export in Module.kilnAsyncExports, or main)', msg, cap);
      return -1;
    }
    return (async function() {
      try {
        var adapter = await navigator.gpu.requestAdapter();
        if (!adapter) throw new Error('navigator.gpu.requestAdapter() found no adapter');
        var l = adapter.limits;
        var f16 = adapter.features.has('shader-f16');
        var device = await adapter.requestDevice({
          requiredFeatures: f16 ? ['shader-f16'] : [],
          requiredLimits: {
            maxStorageBufferBindingSize: l.maxStorageBufferBindingSize, maxBufferSize: l.maxBufferSize,
            maxStorageBuffersPerShaderStage: l.maxStorageBuffersPerShaderStage,
            maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
            maxComputeInvocationsPerWorkgroup: l.maxComputeInvocationsPerWorkgroup,
          }});
        device.addEventListener('uncapturederror', function(e) { KilnGPU.errors += e.error.message + '\n'; });
        device.pushErrorScope('validation');
        device.pushErrorScope('out-of-memory');
        KilnGPU.device = device;
        KilnGPU.used = new Set();
        var dl = device.limits, v = [dl.maxStorageBufferBindingSize, dl.maxBufferSize, dl.maxStorageBuffersPerShaderStage,
                                     dl.maxComputeWorkgroupStorageSize, dl.maxComputeInvocationsPerWorkgroup, f16 ? 1 : 0];
        for (var i = 0; i < 6; ++i) HEAPU32[(limits >> 2) + i] = Math.min(v[i], 4294967295);
        var info = adapter.info || {};
        KilnGPU.text(['WebGPU', info.vendor, info.architecture, info.description].filter(Boolean).join(' '), msg, cap);
        return 0;
      } catch (e) {
        KilnGPU.text(e && e.message ? e.message : e, msg, cap);
        return -1;
      }
    })();
  },
  kiln_wgpu_open__postset: '_kiln_wgpu_open.kilnAsync = true;',

  kiln_wgpu_buffer__deps: ['$KilnGPU'],
  /// A storage buffer of `bytes` (a multiple of 4); its id.
  kiln_wgpu_buffer: function(bytes) {
    return KilnGPU.add(KilnGPU.device.createBuffer({size: bytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST}));
  },

  kiln_wgpu_release__deps: ['$KilnGPU'],
  kiln_wgpu_release: function(id) {
    var K = KilnGPU, b = K.objects[id];
    K.objects[id] = null;
    K.free.push(id);
    if (!b) return;  // never throws: C++ calls it from destructors
    if (K.used.has(b)) K.doomed.push(b); else b.destroy();
  },

  kiln_wgpu_write__deps: ['$KilnGPU'],
  /// Writes n bytes (off and n multiples of 4) from src: after the open batch when it uses the
  /// buffer (queue writes run before any later submission).
  kiln_wgpu_write: function(id, off, src, n) {
    var K = KilnGPU, b = K.objects[id];
    if (K.used.has(b)) K.flush();
    K.device.queue.writeBuffer(b, off, HEAPU8.subarray(src, src + n));
  },

  kiln_wgpu_pipeline__deps: ['$KilnGPU'],
  /// The pipeline of a WGSL kernel whose bindings have the kinds in kinds[n] (0 read-only
  /// storage, 1 storage, 2 uniform); its id, or -1 with the compiler's messages in msg.
  kiln_wgpu_pipeline: function(code, len, kinds, n, msg, cap) {
    var d = KilnGPU.device;
    var wgsl = UTF8ToString(code, len);
    var types = ['read-only-storage', 'storage', 'uniform'];
    var entries = [];
    for (var i = 0; i < n; ++i) {
      var t = types[HEAPU8[kinds + i]];
      entries.push({binding: i, visibility: GPUShaderStage.COMPUTE, buffer: {type: t}});
    }
    return (async function() {
      try {
        var module = d.createShaderModule({code: wgsl});
        var info = await module.getCompilationInfo();
        var errs = info.messages.filter(function(m) { return m.type === 'error'; });
        if (errs.length) throw new Error(errs.map(function(m) { return m.lineNum + ':' + m.linePos + ' ' + m.message; }).join('\n'));
        var layout = d.createBindGroupLayout({entries: entries});
        var pipeline = await d.createComputePipelineAsync({
          layout: d.createPipelineLayout({bindGroupLayouts: [layout]}), compute: {module: module, entryPoint: 'main'}});
        return KilnGPU.add({pipeline: pipeline, layout: layout, kinds: entries.map(function(e) { return e.buffer.type; })});
      } catch (e) {
        KilnGPU.text(e && e.message ? e.message : e, msg, cap);
        return -1;
      }
    })();
  },
  kiln_wgpu_pipeline__postset: '_kiln_wgpu_pipeline.kilnAsync = true;',

  kiln_wgpu_dispatch__deps: ['$KilnGPU'],
  /// Records one dispatch: buffers ids[n] (with byte offsets offs[n]) at bindings 0..n-1, then
  /// the parameter block meta (meta_bytes > 0: a read-only storage binding) and the push
  /// constants (push_bytes > 0: the uniform binding). A buffer bound both for writing and for
  /// reading is read through a copy made first (WebGPU allows no such aliasing in a dispatch).
  kiln_wgpu_dispatch: function(pipe, ids, offs, n, meta, meta_bytes, push, push_bytes, gx, gy, gz) {
    var K = KilnGPU, p = K.objects[pipe], entries = [], written = new Set(), i;
    for (i = 0; i < n; ++i)
      if (p.kinds[i] === 'storage') written.add(HEAPU32[(ids >> 2) + i]);
    for (i = 0; i < n; ++i) {
      var id = HEAPU32[(ids >> 2) + i], off = HEAPU32[(offs >> 2) + i], b = K.objects[id];
      if (p.kinds[i] !== 'storage' && written.has(id)) {
        K.used.add(b);  // the copy reads it: a later host write must wait for this batch
        var copy = K.device.createBuffer({size: b.size, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST});
        K.pending.push({copy: [b, copy, b.size]});
        K.doomed.push(copy);
        b = copy;
      }
      K.used.add(b);
      entries.push({binding: i, resource: {buffer: b, offset: off, size: b.size - off}});
    }
    if (meta_bytes > 0) entries.push({binding: entries.length, param: K.param(meta, meta_bytes)});
    if (push_bytes > 0) entries.push({binding: entries.length, param: K.param(push, push_bytes)});
    K.pending.push({pipeline: p, entries: entries, groups: [gx, gy, gz]});
    if (K.pending.length >= 256) K.flush();
  },

  kiln_wgpu_read__deps: ['$KilnGPU'],
  /// Copies n bytes of buffer id from byte off (multiples of 4) to dst once the recorded work is
  /// done; 0, or -1 with the errors of that work in msg.
  kiln_wgpu_read: function(id, off, dst, n, msg, cap) {
    var K = KilnGPU, d = K.device;
    if (!kilnAsyncDepth) {
      K.text('reading WebGPU memory must happen inside a call that can wait (an export in Module.kilnAsyncExports, or main)', msg, cap);
      return -1;
    }
    K.flush();
    var staging = d.createBuffer({size: n, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});
    var enc = d.createCommandEncoder();
    enc.copyBufferToBuffer(K.objects[id], off, staging, 0, n);
    d.queue.submit([enc.finish()]);
    return (async function() {
      var err = await K.settle();
      if (err) { staging.destroy(); K.text(err, msg, cap); return -1; }
      await staging.mapAsync(GPUMapMode.READ);
      HEAPU8.set(new Uint8Array(staging.getMappedRange()), dst);  // HEAPU8 as it is now: memory may have grown
      staging.unmap();
      staging.destroy();
      return 0;
    })();
  },
  kiln_wgpu_read__postset: '_kiln_wgpu_read.kilnAsync = true;',

  kiln_wgpu_sync__deps: ['$KilnGPU'],
  /// Submits the open batch and waits for all work; 0, or -1 with its errors in msg.
  kiln_wgpu_sync: function(msg, cap) {
    var K = KilnGPU;
    K.flush();
    if (!kilnAsyncDepth) return 0;  // nothing can wait here: errors surface at the next read
    return (async function() {
      var err = await K.settle();
      if (err) { K.text(err, msg, cap); return -1; }
      return 0;
    })();
  },
  kiln_wgpu_sync__postset: '_kiln_wgpu_sync.kilnAsync = true;',
});
