package io.netreduce.daemon.pcap;

import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.concurrent.Callable;

import io.netreduce.protocol.pcap.PcapException;
import io.netreduce.protocol.pcap.PcapReader;
import io.netreduce.protocol.pcap.PcapRecord;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code netreduce pcap verify FILE}: one line per RoCEv2 frame with its ICRC verdict, then a summary.
 * <p>
 * Output lines: {@code <frame#> <opcode-name> psn=<n> qp=<hex> icrc=ok|bad} for frames whose ICRC could be
 * checked, {@code <frame#> truncated (...)} or {@code <frame#> malformed (...)} for RoCEv2 frames that could not,
 * and finally {@code frames=N roce=N icrc_ok=N icrc_bad=N malformed=N other=N}. Frames are numbered from 1 as
 * tshark numbers them. Non-RoCEv2 frames are counted as {@code other} and not listed.
 */
@Command(
    name = "verify",
    mixinStandardHelpOptions = true,
    description = "Check the ICRC of every RoCEv2 frame in a capture.",
    exitCodeListHeading = "Exit codes:%n",
    exitCodeList = {
        "0:every RoCEv2 frame's ICRC is correct",
        "1:some RoCEv2 frame has a bad ICRC, or is malformed or truncated",
        "2:the capture cannot be read (missing, not a capture, damaged, not Ethernet)" })
public final class PcapVerifyCommand implements Callable<Integer>
{
    @Spec
    private CommandSpec spec;

    @Parameters(index = "0", paramLabel = "FILE.pcap", description = "Ethernet capture (pcap or pcapng).")
    private Path file;

    @Override
    public Integer call()
    {
        final PrintWriter out = spec.commandLine().getOut();
        final PrintWriter err = spec.commandLine().getErr();
        final Counts counts = new Counts();
        final PcapReader opened;
        try
        {
            opened = PcapReader.open(file);
        }
        catch (final PcapException ex)
        {
            err.println("netreduce pcap verify: " + ex.getMessage());
            return PcapCommand.EXIT_FILE_ERROR;
        }

        try (PcapReader reader = opened)
        {
            if (reader.linkType() != PcapReader.LINKTYPE_ETHERNET)
            {
                err.println("netreduce pcap verify: " + file + ": link type " + reader.linkType() +
                    " is not Ethernet (EN10MB); only Ethernet captures are supported");
                return PcapCommand.EXIT_FILE_ERROR;
            }

            final PcapRecord record = new PcapRecord();
            final FrameVerdict verdict = new FrameVerdict();
            while (reader.next(record))
            {
                counts.frames++;
                verifyOne(out, counts, verdict, record);
            }
        }
        catch (final PcapException ex)
        {
            // What was read before the damage is still worth reporting.
            out.println(counts);
            out.flush();
            err.println("netreduce pcap verify: " + ex.getMessage());
            return PcapCommand.EXIT_FILE_ERROR;
        }

        out.println(counts);
        return counts.icrcBad + counts.malformed == 0 ? PcapCommand.EXIT_OK : PcapCommand.EXIT_BAD_FRAMES;
    }

    private static void verifyOne(
        final PrintWriter out, final Counts counts, final FrameVerdict verdict, final PcapRecord record)
    {
        switch (verdict.judge(record))
        {
            case OTHER -> counts.other++;
            case MALFORMED ->
            {
                counts.roce++;
                counts.malformed++;
                out.println(counts.frames + " " + verdict.problem());
            }
            case CHECKABLE ->
            {
                counts.roce++;
                boolean ok;
                try
                {
                    ok = verdict.icrcOk();
                }
                catch (final RuntimeException ex)
                {
                    counts.malformed++;
                    out.println(counts.frames + " malformed (ICRC error: " + ex + ")");
                    return;
                }
                if (ok)
                {
                    counts.icrcOk++;
                }
                else
                {
                    counts.icrcBad++;
                }
                out.println(counts.frames + " " + verdict.describe() + " icrc=" + (ok ? "ok" : "bad"));
            }
        }
    }

    private static final class Counts
    {
        long frames;
        long roce;
        long icrcOk;
        long icrcBad;
        long malformed;
        long other;

        @Override
        public String toString()
        {
            return "frames=" + frames + " roce=" + roce + " icrc_ok=" + icrcOk + " icrc_bad=" + icrcBad +
                " malformed=" + malformed + " other=" + other;
        }
    }
}
