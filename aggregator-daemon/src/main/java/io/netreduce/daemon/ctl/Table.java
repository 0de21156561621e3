package io.netreduce.daemon.ctl;

import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.List;

/**
 * A plain-text table with left-aligned columns separated by two spaces, for the CLI's human-readable output.
 */
final class Table
{
    private final List<String> headers;
    private final List<List<String>> rows = new ArrayList<>();

    Table(final String... headers)
    {
        this.headers = List.of(headers);
    }

    Table row(final Object... cells)
    {
        if (cells.length != headers.size())
        {
            throw new IllegalArgumentException("expected " + headers.size() + " cells, got " + cells.length);
        }
        final List<String> row = new ArrayList<>(cells.length);
        for (final Object cell : cells)
        {
            row.add(cell == null ? "-" : cell.toString());
        }
        rows.add(row);
        return this;
    }

    void print(final PrintWriter out)
    {
        final int[] widths = new int[headers.size()];
        for (int c = 0; c < widths.length; c++)
        {
            widths[c] = headers.get(c).length();
            for (final List<String> row : rows)
            {
                widths[c] = Math.max(widths[c], row.get(c).length());
            }
        }
        printRow(out, headers, widths);
        for (final List<String> row : rows)
        {
            printRow(out, row, widths);
        }
        out.flush();
    }

    private static void printRow(final PrintWriter out, final List<String> cells, final int[] widths)
    {
        final StringBuilder line = new StringBuilder();
        for (int c = 0; c < cells.size(); c++)
        {
            line.append(cells.get(c));
            if (c < cells.size() - 1)
            {
                line.append(" ".repeat(widths[c] - cells.get(c).length() + 2));
            }
        }
        out.println(line);
    }
}
