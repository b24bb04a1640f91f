#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""tendctl enable / disable / is-enabled (issue 18; tendctl(1) "enable",
tend(8) "DISABLED UNITS"): which units of DIR tend starts on its own. A
disabled unit has a marker DIR/NAME.service.disabled (written by tend for
`tendctl disable`, or by hand); it is loaded, shown and startable, but not
started at tend's start nor as new at daemon-reload. disable does not stop a
running unit, enable does not start one; --now does, as systemctl. Every
wait is bounded and names the likely cause."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from svctest import ServiceTestCase, pid_alive  # noqa: E402
from tendtest import wait_until  # noqa: E402


class Enablement(ServiceTestCase):
    def marker(self, name):
        return os.path.join(self.dir, name + '.service.disabled')

    def touch_unit(self, name):
        """A unit whose start leaves a file behind: proof it ran (or not)."""
        flag = self.path(name + '.ran')
        self.unit(name, '[Service]\nExecStart=/bin/sh -c \'touch %s; exec sleep 1090\'\n' % flag)
        return flag

    def said_not_started(self, name, timeout=5):
        wait_until(lambda: '%s.service: disabled (%s): not started' % (name, self.marker(name)) in self.stderr(),
                   timeout, lambda: '%s: tend never said it left the disabled unit alone; stderr %r'
                   % (name, self.stderr()[-2000:]))

    def test_disabled_by_hand_is_not_started_at_tend_start(self):
        self.touch_unit('on')
        flag = self.touch_unit('off')
        open(self.marker('off'), 'w').close()  # configuration management's way: an empty file
        self.start_tend()
        self.wait_running('on')
        self.said_not_started('off')
        self.assertEqual(self.st('off')['state'], 'inactive', 'a disabled unit is loaded, not started')
        self.assertFalse(os.path.exists(flag), 'the disabled unit\'s command never ran')
        self.assertEqual(self.ctl('is-enabled', 'on', check=False)[:2], (0, 'enabled\n'))
        self.assertEqual(self.ctl('is-enabled', 'off', check=False)[:2], (1, 'disabled\n'))
        self.assertEqual(self.ctl('is-enabled', 'off', 'on', check=False)[:2], (0, 'disabled\nenabled\n'),
                         'systemctl: 0 when one of them is enabled')
        self.assertEqual(self.ctl('show', '-p', 'UnitFileState', '--value', 'off')[1], 'disabled\n')
        # Disabled is not masked: it starts when asked, as under systemd.
        self.ctl('start', 'off')
        self.wait_running('off')
        wait_until(lambda: os.path.exists(flag), 5, 'the disabled unit, started by hand, never ran its command')

    def test_disable_keeps_it_running_and_holds_at_the_next_start(self):
        self.touch_unit('svc')
        self.start_tend()
        pid = self.wait_running('svc')['main_pid']
        self.assertEqual(self.ctl('disable', 'svc'), (0, '', ''))
        self.assertTrue(os.path.isfile(self.marker('svc')), 'tend wrote the marker into DIR')
        self.assertEqual(self.ctl('disable', 'svc')[0], 0, 'disabling twice is no error')
        r = self.st('svc')
        self.assertEqual((r['state'], r['main_pid']), ('running', pid), 'disable does not stop the unit')
        self.assertEqual(self.ctl('is-enabled', 'svc', check=False)[:2], (1, 'disabled\n'))
        self.assertEqual(self.ctl('is-enabled', '-q', 'svc', check=False)[:2], (1, ''))
        # The next tend does not start it.
        self.assertEqual(self.stop_tend(), 0)
        self.assertFalse(pid_alive(pid))
        os.unlink(self.path('svc.ran'))
        self.start_tend()
        self.said_not_started('svc')
        self.assertEqual(self.st('svc')['state'], 'inactive')
        # enable removes the marker and starts nothing; --now starts it.
        self.assertEqual(self.ctl('enable', 'svc'), (0, '', ''))
        self.assertFalse(os.path.exists(self.marker('svc')))
        self.assertEqual((self.ctl('is-enabled', 'svc')[1], self.st('svc')['state']), ('enabled\n', 'inactive'),
                         'enable does not start the unit')
        self.ctl('disable', 'svc')
        self.ctl('enable', '--now', 'svc')
        self.assertFalse(os.path.exists(self.marker('svc')))
        pid = self.wait_running('svc')['main_pid']
        self.ctl('disable', '--now', 'svc')
        self.assertTrue(os.path.exists(self.marker('svc')))
        self.assertIn(self.st('svc')['state'], ('inactive', 'failed'), 'disable --now stops the unit')
        self.assertFalse(pid_alive(pid))

    def test_daemon_reload_does_not_start_a_new_disabled_unit(self):
        self.touch_unit('first')
        self.start_tend()
        self.wait_running('first')
        # A linked unit (a symlink out of DIR) and a copied one, both disabled, and one enabled.
        outside = self.path('linked.service')
        with open(outside, 'w') as f:
            f.write('[Service]\nExecStart=/bin/sh -c \'touch %s; exec sleep 1091\'\n' % self.path('linked.ran'))
        os.symlink(outside, os.path.join(self.dir, 'linked.service'))
        open(self.marker('linked'), 'w').close()
        copied = self.touch_unit('copied')
        open(self.marker('copied'), 'w').close()
        self.touch_unit('plain')
        self.ctl('daemon-reload')
        self.wait_running('plain')
        self.said_not_started('linked')
        self.said_not_started('copied')
        self.assertEqual((self.st('linked')['state'], self.st('copied')['state']), ('inactive', 'inactive'))
        self.assertFalse(os.path.exists(self.path('linked.ran')) or os.path.exists(copied))
        self.assertEqual(self.ctl('is-enabled', 'linked', check=False)[:2], (1, 'disabled\n'))

    def test_unknown_alias_static(self):
        self.unit('tpl@', '[Service]\nExecStart=/bin/sleep 1092\n')
        self.unit('main', '[Unit]\nWants=tpl@x.service\n[Service]\nExecStart=/bin/sleep 1093\n')
        os.symlink('main.service', os.path.join(self.dir, 'other.service'))
        self.start_tend()
        self.wait_running('main')
        self.wait_running('tpl@x')
        st, out, err = self.ctl('disable', 'nosuch', check=False)
        self.assertEqual((st, out), (1, ''), 'systemctl: a unit file that does not exist is 1')
        self.assertIn('"nosuch" not found', err)
        self.assertEqual(self.ctl('is-enabled', 'nosuch', check=False)[:2], (1, ''))
        self.assertEqual(self.ctl('is-enabled', 'other', check=False)[:2], (0, 'alias\n'))
        self.assertEqual(self.ctl('is-enabled', 'tpl@x', check=False)[:2], (0, 'static\n'),
                         'an instance pulled in has no file in DIR: static, as systemd says of one without [Install]')
        st, _, err = self.ctl('disable', 'tpl@x', check=False)
        self.assertEqual(st, 1)
        self.assertIn('its file is not in the unit directory', err)
        self.assertFalse(os.path.exists(self.marker('tpl@x')))
        # Through the alias, the marker is the unit's own name's.
        self.ctl('disable', 'other')
        self.assertTrue(os.path.exists(self.marker('main')))
        self.assertEqual(self.ctl('status', '--now', check=False)[0], 2, '--now applies to enable/disable only')


if __name__ == '__main__':
    unittest.main()
