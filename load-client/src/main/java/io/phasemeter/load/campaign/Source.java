package io.phasemeter.load.campaign;

import io.phasemeter.load.workload.Profile;
import io.phasemeter.load.workload.dataset.Dataset;
import io.phasemeter.load.workload.dataset.DatasetEntries;
import io.phasemeter.load.workload.replay.Replay;
import io.phasemeter.load.workload.replay.Replayed;
import java.time.Duration;

/**
 * One entry of a plan's {@code profiles}: what its points send, and how it is crossed with the
 * plan's loads (docs/design.md §7, "Campaigns"). A file an entry names is read and checked when the
 * plan loads ({@link PlanSources}), once, and what was read is kept here for every run.
 */
public sealed interface Source {

  /** The stem of its points' ids: {@code doc-qa}, {@code dataset-chat}, {@code sessions-3t}, … */
  String name();

  /** {@code profile}, {@code dataset}, {@code sessions} or {@code replay}. */
  String kind();

  /** Whether each concurrency level makes a point of this entry. */
  default boolean closed() {
    return true;
  }

  /** Whether each rate makes a point of this entry. */
  default boolean open() {
    return true;
  }

  /** The file read, or null. */
  default String file() {
    return null;
  }

  /** The SHA-256 of the file read (as the run's conditions give it), or null. */
  default String sha256() {
    return null;
  }

  /** A named profile ({@code doc-qa}) or custom lengths ({@code 512:64}). */
  record Shape(Profile profile) implements Source {
    @Override
    public String name() {
      return profile.name();
    }

    @Override
    public String kind() {
      return "profile";
    }
  }

  /**
   * {@code {dataset: sharegpt:FILE | jsonl:FILE, output_tokens: N}}: prompts from a file, crossed
   * with the loads as a profile is.
   *
   * @param outputTokens every request's output length, or 0: the file's
   * @param entries what the plan's loading read (kept with {@code dataset}, so no run reads again)
   */
  record FromDataset(String name, Dataset dataset, int outputTokens, DatasetEntries entries)
      implements Source {
    @Override
    public String kind() {
      return "dataset";
    }

    @Override
    public String file() {
      return dataset.file().toString();
    }

    @Override
    public String sha256() {
      return entries.sha256();
    }
  }

  /**
   * {@code {sessions: {turns, think_time, max_tokens, profile}}}: multi-turn sessions; a
   * concurrency level is the number of sessions at once, and rates do not apply.
   *
   * @param maxTokens {@code --session-max-tokens} (completions)
   * @param profile each turn's new input and its output (chat: the output alone)
   */
  record Sessions(String name, int turns, Duration thinkTime, int maxTokens, Profile profile)
      implements Source {
    @Override
    public String kind() {
      return "sessions";
    }

    @Override
    public boolean open() {
      return false;
    }
  }

  /**
   * {@code {replay: FILE, format, speed, limit, prefixes, duration}}: a trace replayed on its own
   * schedule, one point, crossed with nothing.
   *
   * @param replayed the trace as the plan's loading read it
   * @param duration cuts the replay ({@code --duration}), or null: the whole trace
   */
  record Trace(String name, Replay replay, Replayed replayed, Duration duration) implements Source {
    @Override
    public String kind() {
      return "replay";
    }

    @Override
    public boolean closed() {
      return false;
    }

    @Override
    public boolean open() {
      return false;
    }

    @Override
    public String file() {
      return replay.file().toString();
    }

    @Override
    public String sha256() {
      return replayed.sha256();
    }

    /** How long a run of it lasts: the trace's span ÷ speed, or {@code cut} when shorter. */
    public Duration length(Duration cut) {
      return replayed.stepDuration(cut);
    }
  }
}
