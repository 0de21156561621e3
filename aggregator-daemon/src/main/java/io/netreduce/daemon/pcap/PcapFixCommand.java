package io.netreduce.daemon.pcap;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.concurrent.Callable;

import io.netreduce.protocol.pcap.PcapException;
import io.netreduce.protocol.pcap.PcapReader;
import io.netreduce.protocol.pcap.PcapRecord;
import io.netreduce.protocol.pcap.PcapWriter;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code netreduce pcap fix IN OUT}: copy a capture, recomputing the ICRC of every RoCEv2 frame.
 * <p>
 * Every other record (non-RoCEv2, or RoCEv2 too broken to hold an ICRC) is copied byte for byte; timestamps,
 * original lengths, snap length and timestamp resolution are kept. The output is classic pcap (a pcapng input
 * comes out as nanosecond pcap). OUT is written beside itself under a temporary name and moved into place only
 * when complete, so a failure never leaves half a file and OUT may name IN.
 */
@Command(
    name = "fix",
    mixinStandardHelpOptions = true,
    description = "Rewrite the ICRC of every RoCEv2 frame in a capture.",
    exitCodeListHeading = "Exit codes:%n",
    exitCodeList = {
        "0:OUT written",
        "2:IN cannot be read or OUT cannot be written; OUT is left untouched" })
public final class PcapFixCommand implements Callable<Integer>
{
    @Spec
    private CommandSpec spec;

    @Parameters(index = "0", paramLabel = "IN.pcap", description = "Ethernet capture (pcap or pcapng).")
    private Path in;

    @Parameters(index = "1", paramLabel = "OUT.pcap", description = "Where to write the repaired capture.")
    private Path out;

    private long rewritten;
    private long malformed;

    @Override
    public Integer call()
    {
        final PrintWriter stdout = spec.commandLine().getOut();
        final PrintWriter err = spec.commandLine().getErr();
        final Path absoluteOut = out.toAbsolutePath();
        Path temporary = null;
        long frames = 0;
        long roce = 0;
        rewritten = 0;
        malformed = 0;
        try (PcapReader reader = PcapReader.open(in))
        {
            if (reader.linkType() != PcapReader.LINKTYPE_ETHERNET)
            {
                err.println("netreduce pcap fix: " + in + ": link type " + reader.linkType() +
                    " is not Ethernet (EN10MB); only Ethernet captures are supported");
                return PcapCommand.EXIT_FILE_ERROR;
            }

            temporary = Files.createTempFile(absoluteOut.getParent(), "." + absoluteOut.getFileName(), ".tmp");
            try (PcapWriter writer = PcapWriter.create(
                temporary, reader.linkType(), reader.snapLength(), reader.precision()))
            {
                final PcapRecord record = new PcapRecord();
                final FrameVerdict verdict = new FrameVerdict();
                while (reader.next(record))
                {
                    frames++;
                    switch (verdict.judge(record))
                    {
                        case OTHER ->
                        {
                        }
                        case MALFORMED ->
                        {
                            roce++;
                            malformed++;
                            stdout.println(frames + " " + verdict.problem() + ": copied unchanged");
                        }
                        case CHECKABLE ->
                        {
                            roce++;
                            fixOne(stdout, verdict, record, frames);
                        }
                    }
                    writer.write(record);
                }
            }
            Files.move(temporary, absoluteOut, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            temporary = null;
        }
        catch (final PcapException ex)
        {
            err.println("netreduce pcap fix: " + ex.getMessage() + "; " + out + " not written");
            return PcapCommand.EXIT_FILE_ERROR;
        }
        catch (final IOException ex)
        {
            err.println("netreduce pcap fix: cannot write " + out + ": " + ex);
            return PcapCommand.EXIT_FILE_ERROR;
        }
        finally
        {
            deleteQuietly(temporary);
        }

        stdout.println("frames=" + frames + " roce=" + roce + " icrc_rewritten=" + rewritten +
            " icrc_unchanged=" + (roce - malformed - rewritten) + " malformed=" + malformed +
            " other=" + (frames - roce));
        return PcapCommand.EXIT_OK;
    }

    private void fixOne(final PrintWriter stdout, final FrameVerdict verdict, final PcapRecord record, final long frame)
    {
        try
        {
            if (verdict.rewriteIcrc(record))
            {
                rewritten++;
                stdout.println(frame + " " + verdict.describe() + " icrc=rewritten");
            }
        }
        catch (final RuntimeException ex)
        {
            // Parser and ICRC code are fuzzed not to throw; should they, the frame is copied as it came.
            malformed++;
            stdout.println(frame + " malformed (ICRC error: " + ex + "): copied unchanged");
        }
    }

    private static void deleteQuietly(final Path file)
    {
        if (null != file)
        {
            try
            {
                Files.deleteIfExists(file);
            }
            catch (final IOException ignore)
            {
                // the real failure has been reported already
            }
        }
    }
}
