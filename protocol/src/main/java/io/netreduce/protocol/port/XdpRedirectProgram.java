package io.netreduce.protocol.port;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The XDP program an {@link AfXdpPort} attaches to its interface, assembled here as eBPF bytecode so that the
 * project ships it without a compiler. In C it reads:
 * <pre>
 * int netreduce_xsk(struct xdp_md *ctx)
 * {
 *     return bpf_redirect_map(&amp;xsks_map, ctx-&gt;rx_queue_index, XDP_PASS);
 * }
 * </pre>
 * Every frame arriving on a queue whose entry in the XSKMAP holds a socket goes to that socket; on other queues
 * (no entry) the helper returns its flags argument, XDP_PASS, and the frame takes the normal kernel path. The
 * program never reads packet data, which is why it may be loaded with BPF_F_XDP_HAS_FRAGS: multi-buffer (jumbo)
 * frames reach it, and through it the socket, whole.
 * <p>
 * The map is referred to by file descriptor with a BPF_LD_IMM64 of source register BPF_PSEUDO_MAP_FD; the
 * verifier replaces it with the map's address at load time.
 */
final class XdpRedirectProgram
{
    /** struct bpf_insn: u8 code, u8 dst_reg:4 | src_reg:4, s16 off, s32 imm. */
    static final int INSTRUCTION_SIZE = 8;
    /** Licence string the kernel checks helpers against (bpf_redirect_map is not GPL-only, but say it plainly). */
    static final String LICENSE = "GPL";
    /** Name the program shows under in bpftool and /proc (at most 15 characters). */
    static final String NAME = "netreduce_xsk";

    // Opcodes (linux/bpf_common.h, linux/bpf.h)
    private static final int BPF_LDX_MEM_W = 0x01 | 0x60 | 0x00;   // BPF_LDX | BPF_MEM | BPF_W
    private static final int BPF_LD_IMM_DW = 0x00 | 0x00 | 0x18;   // BPF_LD | BPF_IMM | BPF_DW (two slots)
    private static final int BPF_ALU64_MOV_K = 0x07 | 0xb0 | 0x00; // BPF_ALU64 | BPF_MOV | BPF_K
    private static final int BPF_JMP_CALL = 0x05 | 0x80;           // BPF_JMP | BPF_CALL
    private static final int BPF_JMP_EXIT = 0x05 | 0x90;           // BPF_JMP | BPF_EXIT

    private static final int R1 = 1;
    private static final int R2 = 2;
    private static final int R3 = 3;
    /** src_reg of a BPF_LD_IMM64 whose immediate is a map file descriptor. */
    private static final int BPF_PSEUDO_MAP_FD = 1;
    /** struct xdp_md: data, data_end, data_meta, ingress_ifindex, then __u32 rx_queue_index. */
    private static final int XDP_MD_RX_QUEUE_INDEX_OFFSET = 16;
    /** enum xdp_action XDP_PASS, the fallback action passed in bpf_redirect_map's flags. */
    static final int XDP_PASS = 2;
    /** enum bpf_func_id BPF_FUNC_redirect_map. */
    private static final int BPF_FUNC_REDIRECT_MAP = 51;

    private XdpRedirectProgram()
    {
    }

    /**
     * @param xskMapFd descriptor of the XSKMAP holding the sockets by queue index.
     * @return the program's instructions, little-endian, ready for BPF_PROG_LOAD.
     */
    static byte[] instructions(final int xskMapFd)
    {
        final ByteBuffer code = ByteBuffer.allocate(6 * INSTRUCTION_SIZE).order(ByteOrder.LITTLE_ENDIAN);
        // r2 = ctx->rx_queue_index (r1 holds ctx on entry)
        instruction(code, BPF_LDX_MEM_W, R2, R1, XDP_MD_RX_QUEUE_INDEX_OFFSET, 0);
        // r1 = &xsks_map: a 16-byte instruction, the upper 32 bits of the immediate in the second slot
        instruction(code, BPF_LD_IMM_DW, R1, BPF_PSEUDO_MAP_FD, 0, xskMapFd);
        instruction(code, 0, 0, 0, 0, 0);
        // r3 = XDP_PASS: what the helper returns when the queue has no socket
        instruction(code, BPF_ALU64_MOV_K, R3, 0, 0, XDP_PASS);
        // r0 = bpf_redirect_map(r1, r2, r3); return r0
        instruction(code, BPF_JMP_CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP);
        instruction(code, BPF_JMP_EXIT, 0, 0, 0, 0);
        return code.array();
    }

    private static void instruction(
        final ByteBuffer code, final int opcode, final int dst, final int src, final int offset, final int immediate)
    {
        code.put((byte)opcode);
        code.put((byte)((src << 4) | dst));
        code.putShort((short)offset);
        code.putInt(immediate);
    }
}
