import { SecretBox, SecretKeyError } from './secret-box';

describe('SecretBox', () => {
  const box = new SecretBox('k'.repeat(40));

  it('opens what it sealed, for the same exporter only', () => {
    const sealed = box.seal({ signingSecret: 's3cret-s3cret-s3cret' }, 'exp_1');
    expect(sealed).not.toContain('s3cret');
    expect(box.open(sealed, 'exp_1')).toEqual({ signingSecret: 's3cret-s3cret-s3cret' });
    expect(() => box.open(sealed, 'exp_2')).toThrow(SecretKeyError);
  });

  it('refuses a value sealed under another key', () => {
    const other = new SecretBox('o'.repeat(40));
    expect(() => other.open(box.seal({ a: 1 }, 'exp_1'), 'exp_1')).toThrow(/TOLLGATE_SECRET_KEY/);
  });
});
