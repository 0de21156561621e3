package io.netreduce.controlplane.metrics;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A strict parser of the Prometheus text format 0.0.4 for tests: every line must be a HELP, a TYPE, or a sample
 * with a legal name, legal label names, quoted label values and a float value; samples must follow the TYPE of
 * their family. Any other line fails the parse.
 */
final class PrometheusTextParser
{
    private static final Pattern NAME = Pattern.compile("[a-zA-Z_:][a-zA-Z0-9_:]*");
    private static final Pattern HELP = Pattern.compile("# HELP (" + NAME.pattern() + ") (.*)");
    private static final Pattern TYPE =
        Pattern.compile("# TYPE (" + NAME.pattern() + ") (counter|gauge|histogram|summary|untyped)");
    private static final Pattern SAMPLE =
        Pattern.compile("(" + NAME.pattern() + ")(\\{(.*)})? ([-+]?(?:[0-9.eE+-]+|Inf|NaN))( -?[0-9]+)?");
    private static final Pattern LABEL = Pattern.compile("([a-zA-Z_][a-zA-Z0-9_]*)=\"((?:[^\"\\\\]|\\\\.)*)\"(,|$)");

    record Sample(String name, Map<String, String> labels, double value)
    {
    }

    record Family(String name, String type, String help, List<Sample> samples)
    {
    }

    static Map<String, Family> parse(final String text)
    {
        final Map<String, Family> families = new LinkedHashMap<>();
        final Map<String, String> helps = new LinkedHashMap<>();
        Family current = null;
        int lineNumber = 0;
        for (final String line : text.split("\n", -1))
        {
            lineNumber++;
            if (line.isEmpty())
            {
                continue;
            }
            Matcher m = HELP.matcher(line);
            if (m.matches())
            {
                helps.put(m.group(1), m.group(2));
                continue;
            }
            m = TYPE.matcher(line);
            if (m.matches())
            {
                if (families.containsKey(m.group(1)))
                {
                    throw new IllegalArgumentException("line " + lineNumber + ": second TYPE for " + m.group(1));
                }
                current = new Family(m.group(1), m.group(2), helps.get(m.group(1)), new ArrayList<>());
                families.put(current.name(), current);
                continue;
            }
            if (line.startsWith("#"))
            {
                throw new IllegalArgumentException("line " + lineNumber + ": unexpected comment: " + line);
            }
            m = SAMPLE.matcher(line);
            if (!m.matches())
            {
                throw new IllegalArgumentException("line " + lineNumber + ": not a sample: " + line);
            }
            final String name = m.group(1);
            if (current == null || !belongs(name, current))
            {
                throw new IllegalArgumentException("line " + lineNumber + ": sample " + name + " outside its family");
            }
            final Map<String, String> labels = new LinkedHashMap<>();
            if (m.group(3) != null && !m.group(3).isEmpty())
            {
                final Matcher lm = LABEL.matcher(m.group(3));
                int end = 0;
                while (lm.find() && lm.start() == end)
                {
                    if (labels.put(lm.group(1), lm.group(2).replace("\\\"", "\"").replace("\\\\", "\\")) != null)
                    {
                        throw new IllegalArgumentException("line " + lineNumber + ": repeated label " + lm.group(1));
                    }
                    end = lm.end();
                }
                if (end != m.group(3).length())
                {
                    throw new IllegalArgumentException("line " + lineNumber + ": bad labels: " + m.group(3));
                }
            }
            final String valueText = m.group(4);
            final double value = switch (valueText)
            {
                case "+Inf", "Inf" -> Double.POSITIVE_INFINITY;
                case "-Inf" -> Double.NEGATIVE_INFINITY;
                case "NaN" -> Double.NaN;
                default -> Double.parseDouble(valueText);
            };
            current.samples().add(new Sample(name, labels, value));
        }
        return families;
    }

    private static boolean belongs(final String sample, final Family family)
    {
        final String base = family.name();
        return switch (family.type())
        {
            case "counter" -> sample.equals(base + "_total") || sample.equals(base + "_created") ||
                sample.equals(base);
            case "histogram" -> sample.equals(base + "_bucket") || sample.equals(base + "_count") ||
                sample.equals(base + "_sum") || sample.equals(base + "_created");
            default -> sample.equals(base);
        };
    }

    private PrometheusTextParser()
    {
    }
}
