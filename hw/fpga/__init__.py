"""The RTL on a board: boards, bitstreams, the UART bridge protocol and the ``board`` back end
(see :mod:`openvta.hw`)."""
