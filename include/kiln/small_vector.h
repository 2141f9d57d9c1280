// SPDX-License-Identifier: MIT OR Apache-2.0
#pragma once
// A vector with inline storage for the first N elements; used for shapes, strides and dims so
// that the common case (rank <= N) never touches the heap.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <new>
#include <type_traits>
#include <utility>

namespace kiln {

/// Small vector of trivially copyable T with N elements stored inline.
template <class T, size_t N>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVec() = default;
  SmallVec(std::initializer_list<T> init) { assign(init.begin(), init.end()); }
  explicit SmallVec(size_t n, T value = T()) {
    resize(n);
    std::fill(begin(), end(), value);
  }
  template <class It, class = decltype(*std::declval<It>())>
  SmallVec(It first, It last) {
    assign(first, last);
  }
  SmallVec(const SmallVec& o) { assign(o.begin(), o.end()); }
  SmallVec(SmallVec&& o) noexcept { steal(o); }
  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this != &o) {
      release();
      steal(o);
    }
    return *this;
  }
  ~SmallVec() { release(); }

  template <class It>
  void assign(It first, It last) {
    size_t n = static_cast<size_t>(std::distance(first, last));
    size_ = 0;
    reserve(n);
    T* d = data();
    for (size_t i = 0; first != last; ++first, ++i) d[i] = static_cast<T>(*first);
    size_ = n;
  }

  T* data() { return heap_ ? heap_ : inline_; }
  const T* data() const { return heap_ ? heap_ : inline_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }

  void reserve(size_t n) {
    if (n <= capacity()) return;
    size_t cap = std::max(n, capacity() * 2);
    T* p = new T[cap];
    if (size_) std::memcpy(p, data(), size_ * sizeof(T));
    delete[] heap_;
    heap_ = p;
    cap_ = cap;
  }
  void resize(size_t n, T value = T()) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data()[i] = value;
    size_ = n;
  }
  void push_back(T v) {
    reserve(size_ + 1);
    data()[size_++] = v;
  }
  void pop_back() { --size_; }
  void clear() { size_ = 0; }
  void insert(size_t pos, T v) {
    reserve(size_ + 1);
    T* d = data();
    for (size_t i = size_; i > pos; --i) d[i] = d[i - 1];
    d[pos] = v;
    ++size_;
  }
  void erase(size_t pos) {
    T* d = data();
    for (size_t i = pos + 1; i < size_; ++i) d[i - 1] = d[i];
    --size_;
  }

  friend bool operator==(const SmallVec& a, const SmallVec& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const SmallVec& a, const SmallVec& b) { return !(a == b); }

 private:
  size_t capacity() const { return heap_ ? cap_ : N; }
  void release() {
    delete[] heap_;
    heap_ = nullptr;
    size_ = 0;
  }
  void steal(SmallVec& o) {
    if (o.heap_) {
      heap_ = o.heap_;
      cap_ = o.cap_;
      size_ = o.size_;
      o.heap_ = nullptr;
      o.size_ = 0;
    } else {
      heap_ = nullptr;
      size_ = o.size_;
      std::memcpy(inline_, o.inline_, size_ * sizeof(T));
      o.size_ = 0;
    }
  }

  T inline_[N];
  T* heap_ = nullptr;
  size_t cap_ = 0;
  size_t size_ = 0;
};

/// Vector of any T with N elements stored inline: SmallVec's counterpart for types that are not
/// trivially copyable (an op's operand descriptors, tensor handles). Elements are constructed
/// in place and moved when the vector grows past N onto the heap.
template <class T, size_t N>
class InlineVec {
  static_assert(std::is_nothrow_move_constructible_v<T>);  // growing and moving never throw midway

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  InlineVec() = default;
  InlineVec(std::initializer_list<T> init) { append(init.begin(), init.end()); }
  template <class It, class = decltype(*std::declval<It>())>
  InlineVec(It first, It last) {
    append(first, last);
  }
  InlineVec(const InlineVec& o) { append(o.begin(), o.end()); }
  InlineVec(InlineVec&& o) noexcept { take(o); }
  InlineVec& operator=(const InlineVec& o) {
    if (this != &o) {
      clear();
      append(o.begin(), o.end());
    }
    return *this;
  }
  InlineVec& operator=(InlineVec&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  InlineVec& operator=(std::initializer_list<T> init) {
    clear();
    append(init.begin(), init.end());
    return *this;
  }
  ~InlineVec() { release(); }

  T* data() { return heap_ ? heap_ : reinterpret_cast<T*>(inline_); }
  const T* data() const { return heap_ ? heap_ : reinterpret_cast<const T*>(inline_); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }

  void reserve(size_t n) {
    if (n <= capacity()) return;
    const size_t cap = std::max(n, capacity() * 2);
    T* p = static_cast<T*>(::operator new(cap * sizeof(T), std::align_val_t(alignof(T))));
    T* d = data();
    for (size_t i = 0; i < size_; ++i) {
      new (p + i) T(std::move(d[i]));
      d[i].~T();
    }
    free_heap();
    heap_ = p;
    cap_ = cap;
  }
  template <class... A>
  T& emplace_back(A&&... a) {
    T* p;
    if (size_ == capacity()) {
      T v(std::forward<A>(a)...);  // a may name an element of this vector
      reserve(size_ + 1);
      p = new (data() + size_) T(std::move(v));
    } else {
      p = new (data() + size_) T(std::forward<A>(a)...);
    }
    ++size_;  // only once the element exists: a throwing constructor leaves the vector as it was
    return *p;
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }
  void pop_back() { data()[--size_].~T(); }
  void clear() {
    while (size_) pop_back();
  }
  void resize(size_t n) {
    reserve(n);
    while (size_ > n) pop_back();
    while (size_ < n) emplace_back();
  }

  friend bool operator==(const InlineVec& a, const InlineVec& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const InlineVec& a, const InlineVec& b) { return !(a == b); }

 private:
  size_t capacity() const { return heap_ ? cap_ : N; }
  template <class It>
  void append(It first, It last) {
    reserve(size_ + static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) emplace_back(*first);
  }
  void free_heap() {
    if (heap_) ::operator delete(heap_, std::align_val_t(alignof(T)));
    heap_ = nullptr;
  }
  void release() {
    clear();
    free_heap();
  }
  void take(InlineVec& o) {
    if (o.heap_) {
      heap_ = o.heap_;
      cap_ = o.cap_;
      size_ = o.size_;
      o.heap_ = nullptr;
      o.size_ = 0;
      return;
    }
    T* d = reinterpret_cast<T*>(inline_);
    for (size_t i = 0; i < o.size_; ++i) new (d + i) T(std::move(o.data()[i]));
    size_ = o.size_;
    o.clear();
  }

  alignas(T) unsigned char inline_[N * sizeof(T)];
  T* heap_ = nullptr;
  size_t cap_ = 0;
  size_t size_ = 0;
};

}  // namespace kiln
