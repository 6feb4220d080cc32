package io.phasemeter.load.workload.replay;

import java.util.Arrays;

/**
 * Growable primitive columns for a trace's rows: millions of rows cost a few arrays, not millions
 * of objects. Not thread-safe; a trace is built by one reader and then only read.
 */
final class Columns {
  private Columns() {}

  /** A growable {@code int} column. */
  static final class Ints {
    private int[] a;
    private int size;

    Ints(int capacity) {
      a = new int[Math.max(4, capacity)];
    }

    void add(int v) {
      if (size == a.length) {
        a = Arrays.copyOf(a, grow(a.length));
      }
      a[size++] = v;
    }

    int get(int i) {
      return a[i];
    }

    int size() {
      return size;
    }

    /** The values, in an array of exactly {@link #size()}. */
    int[] toArray() {
      return a.length == size ? a : Arrays.copyOf(a, size);
    }
  }

  /** A growable {@code long} column. */
  static final class Longs {
    private long[] a;
    private int size;

    Longs(int capacity) {
      a = new long[Math.max(4, capacity)];
    }

    void add(long v) {
      if (size == a.length) {
        a = Arrays.copyOf(a, grow(a.length));
      }
      a[size++] = v;
    }

    long get(int i) {
      return a[i];
    }

    int size() {
      return size;
    }

    void clear() {
      size = 0;
    }

    long[] toArray() {
      return a.length == size ? a : Arrays.copyOf(a, size);
    }
  }

  /**
   * An {@code int} column whose values are all {@code fill} until one differs: the array exists
   * only from then on (a trace without sessions keeps no session column).
   */
  static final class Sparse {
    private final int fill;
    private Ints values;
    private int size;

    Sparse(int fill) {
      this.fill = fill;
    }

    void add(int v) {
      if (values == null && v != fill) {
        values = new Ints(size + 1);
        for (int i = 0; i < size; i++) {
          values.add(fill);
        }
      }
      if (values != null) {
        values.add(v);
      }
      size++;
    }

    /** The values, or null when every one is the fill. */
    int[] toArrayOrNull() {
      return values == null ? null : values.toArray();
    }
  }

  /** A {@code long} column like {@link Sparse}: no array while every value is {@code fill}. */
  static final class SparseLongs {
    private final long fill;
    private Longs values;
    private int size;

    SparseLongs(long fill) {
      this.fill = fill;
    }

    void add(long v) {
      if (values == null && v != fill) {
        values = new Longs(size + 1);
        for (int i = 0; i < size; i++) {
          values.add(fill);
        }
      }
      if (values != null) {
        values.add(v);
      }
      size++;
    }

    /** The values, or null when every one is the fill. */
    long[] toArrayOrNull() {
      return values == null ? null : values.toArray();
    }
  }

  /**
   * Interns non-negative {@code long} keys to 0, 1, 2, … in the order first seen (open addressing,
   * linear probing, at most half full).
   */
  static final class Interner {
    private static final long EMPTY = -1;
    private long[] keys = filled(16);
    private int[] ids = new int[16];
    private final Longs byId = new Longs(16);

    /** The id of {@code key} (≥ 0), a new one when first seen. */
    int intern(long key) {
      if (2 * (byId.size() + 1) > keys.length) {
        rehash(keys.length * 2);
      }
      int mask = keys.length - 1;
      int i = (int) (io.phasemeter.load.workload.Workload.mix64(key) & mask);
      while (keys[i] != EMPTY) {
        if (keys[i] == key) {
          return ids[i];
        }
        i = (i + 1) & mask;
      }
      keys[i] = key;
      ids[i] = byId.size();
      byId.add(key);
      return ids[i];
    }

    /** Distinct keys so far. */
    int size() {
      return byId.size();
    }

    /** The keys by id. */
    long[] keys() {
      return byId.toArray();
    }

    private void rehash(int capacity) {
      long[] oldKeys = keys;
      int[] oldIds = ids;
      keys = filled(capacity);
      ids = new int[capacity];
      int mask = capacity - 1;
      for (int j = 0; j < oldKeys.length; j++) {
        if (oldKeys[j] != EMPTY) {
          int i = (int) (io.phasemeter.load.workload.Workload.mix64(oldKeys[j]) & mask);
          while (keys[i] != EMPTY) {
            i = (i + 1) & mask;
          }
          keys[i] = oldKeys[j];
          ids[i] = oldIds[j];
        }
      }
    }

    private static long[] filled(int n) {
      long[] a = new long[n];
      Arrays.fill(a, EMPTY);
      return a;
    }
  }

  private static int grow(int length) {
    int next = length + (length >> 1) + 1;
    if (next < 0 || next > Integer.MAX_VALUE - 16) {
      throw new IllegalStateException("a trace column cannot grow past " + length + " values");
    }
    return next;
  }
}
