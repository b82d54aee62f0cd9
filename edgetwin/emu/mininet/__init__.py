"""The emulator (mode ``emu``): Mininet hosts joined by shaped links, running the real ViT ranks.

``topology`` builds the hosts, addresses and tc commands from the scenario (pure);
``medium`` the shared medium's (one IFB for every station's airtime, pure);
``net`` builds and always tears down the Mininet network; ``loss`` and ``delay`` add
packet loss and latency without netem (iptables, the ``delayline`` helper); ``checks``
measures the shaped links with iperf3 and ping; ``runner`` turns configurations into rows.
"""
