package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.netreduce.ForeignTagEvents;
import io.netreduce.dataplane.counters.DataplaneCounters;
import org.HdrHistogram.SingleWriterRecorder;
import org.agrona.concurrent.ManyToOneConcurrentArrayQueue;

/**
 * What the control side holds of one lane's agent: its command queue (many producers, the agent consumes), and
 * what the agent alone writes and others only read (counters, latency recorder, foreign-tag events).
 */
record LaneHandle(
    ManyToOneConcurrentArrayQueue<DataplaneCommand> commands,
    DataplaneCounters counters,
    SingleWriterRecorder latency,
    ForeignTagEvents foreignTags)
{
}
