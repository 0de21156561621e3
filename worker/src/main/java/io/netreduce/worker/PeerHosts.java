package io.netreduce.worker;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * {@code --peers}: the bootstrap host of every rank of the ring, in rank order.
 */
final class PeerHosts
{
    private PeerHosts()
    {
    }

    /**
     * @param peers a file with one 'HOST' or 'RANK HOST' per line, a comma-separated list in rank order, or null
     *              for the test bed's 10.77.0.(rank+1).
     * @param world the number of ranks.
     * @return the host of each rank.
     * @throws IllegalArgumentException unless there is exactly one host for every rank.
     */
    static List<String> resolve(final String peers, final int world) throws IOException
    {
        final List<String> hosts = new ArrayList<>();
        if (peers == null)
        {
            for (int r = 0; r < world; r++)
            {
                hosts.add("10.77.0." + (r + 1));
            }
            return hosts;
        }
        final Path file = Path.of(peers);
        final boolean isFile = Files.isRegularFile(file);
        if (!isFile && peers.contains("/"))
        {
            // no host name has a slash: this was meant as a file
            throw new IllegalArgumentException("--peers " + peers + ": no such file");
        }
        if (isFile)
        {
            final String[] byRank = new String[world];
            int next = 0;
            for (final String raw : Files.readAllLines(file, StandardCharsets.UTF_8))
            {
                final String line = raw.strip();
                if (line.isEmpty() || line.startsWith("#"))
                {
                    continue;
                }
                final String[] parts = line.split("\\s+");
                final int r = parts.length >= 2 ? rank(file, parts[0]) : next;
                if (r < 0 || r >= world)
                {
                    throw new IllegalArgumentException("peers file " + file + ": rank " + r + " outside 0.." +
                        (world - 1));
                }
                byRank[r] = parts.length >= 2 ? parts[1] : parts[0];
                next = r + 1;
            }
            for (int r = 0; r < world; r++)
            {
                if (byRank[r] == null)
                {
                    throw new IllegalArgumentException("peers file " + file + " has no host for rank " + r);
                }
                hosts.add(byRank[r]);
            }
            return hosts;
        }
        for (final String host : peers.split(","))
        {
            hosts.add(host.strip());
        }
        if (hosts.size() != world)
        {
            throw new IllegalArgumentException("--peers lists " + hosts.size() + " hosts for " + world + " ranks");
        }
        return hosts;
    }

    private static int rank(final Path file, final String text)
    {
        try
        {
            return Integer.parseInt(text);
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException("peers file " + file + ": '" + text + "' is not a rank (lines are " +
                "'HOST' or 'RANK HOST')");
        }
    }
}
