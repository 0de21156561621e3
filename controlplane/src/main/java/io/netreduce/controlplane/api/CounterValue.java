package io.netreduce.controlplane.api;

import com.fasterxml.jackson.annotation.JsonIgnore;

import java.util.Map;
import java.util.TreeMap;

/**
 * One counter as the API reports it. The key is stable for scripts: the Prometheus series the same counter is
 * exported as on {@code /metrics}, e.g. {@code netreduce_dataplane_frames_received} or
 * {@code netreduce_dataplane_drops{reason="bad_icrc"}}; the description is the sentence people read.
 *
 * @param metric      the Prometheus metric name (without {@code _total}).
 * @param labels      the series' labels, if any.
 * @param description what it counts, in words.
 * @param value       the current value.
 */
public record CounterValue(String metric, Map<String, String> labels, String description, long value)
{
    public CounterValue
    {
        labels = new TreeMap<>(labels);
    }

    /**
     * @return the series key: {@code metric} or {@code metric{name="value",...}} with labels in name order.
     */
    @JsonIgnore
    public String key()
    {
        if (labels.isEmpty())
        {
            return metric;
        }
        final StringBuilder key = new StringBuilder(metric).append('{');
        labels.forEach((name, value) -> key.append(name).append("=\"").append(value).append("\","));
        key.setLength(key.length() - 1);
        return key.append('}').toString();
    }
}
