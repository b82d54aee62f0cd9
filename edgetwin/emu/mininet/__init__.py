"""The emulator (mode ``emu``): Mininet hosts joined by shaped links, running the real ViT ranks.

``topology`` builds the hosts, addresses and tc commands from the scenario (pure);
``medium`` the shared medium's (one IFB for every station's airtime, pure);
``net`` builds and always tears down the Mininet network; ``checks`` measures the
shaped links with iperf3; ``runner`` turns configurations into rows.
"""
