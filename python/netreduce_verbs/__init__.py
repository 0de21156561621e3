"""netreduce verbs client: the worker side of NetReduce on real RDMA verbs (pyverbs over libibverbs).

Runs on any RoCEv2 device libibverbs drives: the Linux kernel's soft-RoCE (rdma_rxe) in the interop VMs, or a
ConnectX-class NIC. Each rank connects one RC queue pair to its ring successor (connection exchange over TCP)
and runs either the NetReduce all-reduce (messages with the INA header, RDMA WRITE WITH IMMEDIATE, a window of
N messages advanced by result completions; the appliance sums) or a plain ring all-reduce over its own RC QPs.

Modules without pyverbs (ina, layout, tensors) are importable anywhere, so their tests run on hosts without
RDMA; verbs, ring and the collectives need pyverbs and a device.
"""
